package bench

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestGeneratorsAPIValid: every scenario generator publishes objects a
// kube-apiserver accepts. model.Validate (the API server's ResourceSlice
// rules and the allocator's pool checks) must find nothing at all, and the
// names of the other objects (Nodes, DeviceClasses, ResourceClaims and
// their allocations) must pass the API's name rules.
func TestGeneratorsAPIValid(t *testing.T) {
	type generated struct {
		name string
		objs func(t *testing.T) []*input.Objects
	}
	generate := func(scenario string, sz Size, opts GenerateOptions) func(t *testing.T) []*input.Objects {
		return func(t *testing.T) []*input.Objects {
			var out []*input.Objects
			for _, seed := range []uint64{1, 2} {
				insts, err := Generate(scenario, sz, seed, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range insts {
					out = append(out, in.Objs)
				}
			}
			return out
		}
	}
	var gens []generated
	for _, fleet := range gen.MIGFleets {
		// Nine GPUs a node: two counter slices and an odd device slice.
		gens = append(gens, generated{"mig " + fleet, generate("mig", Size{Nodes: 3, GPUs: 9, Claims: 150}, GenerateOptions{MIGGPU: fleet})})
	}
	for _, fam := range gen.MIGFamilies[1:] {
		gens = append(gens, generated{"mig " + fam, generate("mig", Size{Nodes: 3, GPUs: 9, Claims: 150}, GenerateOptions{MIGGPU: "mixed", MIGFamily: fam})})
	}
	gens = append(gens,
		generated{"tpu", generate("tpu", Size{Nodes: 32, Claims: 40}, GenerateOptions{})},
		generated{"modes", generate("modes", Size{Nodes: 2, GPUs: 9, Claims: 120}, GenerateOptions{})},
		generated{"gpu-nic", generate("gpu-nic", Size{Nodes: 2, Claims: 30}, GenerateOptions{})},
		generated{"openb", func(t *testing.T) []*input.Objects {
			if _, err := OpenBDir(""); err != nil {
				t.Skipf("no openb trace: %v", err)
			}
			return openbObjects(t)
		}},
	)
	for _, g := range gens {
		t.Run(strings.ReplaceAll(g.name, " ", "-"), func(t *testing.T) {
			for i, objs := range g.objs(t) {
				fs, err := model.Validate(context.Background(), objs)
				if err != nil {
					t.Fatal(err)
				}
				for k, f := range fs {
					if k == 10 {
						t.Errorf("%s #%d: %d findings in all", g.name, i, len(fs))
						break
					}
					t.Errorf("%s #%d: %s", g.name, i, f)
				}
				for k, e := range apiNameErrors(objs) {
					if k == 10 {
						t.Errorf("%s #%d: more name errors", g.name, i)
						break
					}
					t.Errorf("%s #%d: %s", g.name, i, e)
				}
			}
		})
	}
}

// openbObjects publishes the nodes of the trace as A100s and as H100s, with
// a claim for every GPU task of the task lists the replay reads. With
// -short only a sample of the nodes is published (every node of the whole
// trace takes seconds to build and validate): each GPU count's first node
// and every 25th; the names of all the others are checked on their own.
func openbObjects(t *testing.T) []*input.Objects {
	var nodes []openbNode
	var tasks []openbTask
	// multigpu50 has no arrival times; the replay refuses it.
	for _, pods := range []string{"default", "gpushare100"} {
		n, ts, err := loadOpenB(OpenBConfig{Pods: pods}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		nodes, tasks = n, append(tasks, ts...)
	}
	if testing.Short() {
		var sample []openbNode
		seen := map[int]bool{}
		for i, n := range nodes {
			if i%25 == 0 || !seen[n.gpus] {
				sample = append(sample, n)
				seen[n.gpus] = true
				continue
			}
			// The names the cluster would derive from the node's.
			for _, name := range []string{n.name, n.name + "-counters-0", fmt.Sprintf("%s-gpus-%d", n.name, (n.gpus-1)/2)} {
				if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
					t.Errorf("openb node %s: %q: %s", n.name, name, strings.Join(msgs, "; "))
				}
			}
		}
		nodes = sample
	}
	var out []*input.Objects
	for _, gm := range []*gen.GPUModel{&gen.A100, &gen.H100} {
		objs := openbCluster(nodes, gm, false)
		for i := range tasks {
			objs.Claims = append(objs.Claims, openbClaim(&tasks[i], gm))
		}
		out = append(out, objs)
	}
	return out
}

var cIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// apiNameErrors checks the names of the objects other than ResourceSlices
// as the API server does (ObjectMeta names, label keys and values, request
// names, class references, constraint attributes, allocation results).
func apiNameErrors(objs *input.Objects) []string {
	var out []string
	add := func(what string, msgs []string) {
		if len(msgs) > 0 {
			out = append(out, what+": "+strings.Join(msgs, "; "))
		}
	}
	label := func(what, s string) { add(fmt.Sprintf("%s %q", what, s), validation.IsDNS1123Label(s)) }
	subdomain := func(what, s string) { add(fmt.Sprintf("%s %q", what, s), validation.IsDNS1123Subdomain(s)) }
	pool := func(what, s string) {
		if len(s) > resourceapi.PoolNameMaxLength {
			out = append(out, fmt.Sprintf("%s %q: longer than %d", what, s, resourceapi.PoolNameMaxLength))
		}
		for _, part := range strings.Split(s, "/") {
			subdomain(what, part)
		}
	}
	qualified := func(what, s string) {
		domain, id, ok := strings.Cut(s, "/")
		if !ok {
			id, domain = s, ""
		} else {
			subdomain(what+" domain", domain)
		}
		if len(id) > resourceapi.DeviceMaxIDLength || !cIdentifier.MatchString(id) {
			out = append(out, fmt.Sprintf("%s %q: not a C identifier of at most %d characters", what, s, resourceapi.DeviceMaxIDLength))
		}
	}
	devices := map[input.DeviceID]bool{}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			devices[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = true
		}
	}
	for _, n := range objs.Nodes {
		subdomain("Node", n.Name)
		for _, e := range metav1validation.ValidateLabels(n.Labels, field.NewPath("metadata", "labels")) {
			out = append(out, fmt.Sprintf("Node %s: %v", n.Name, e))
		}
	}
	for _, c := range objs.Classes {
		subdomain("DeviceClass", c.Name)
	}
	for _, c := range objs.Claims {
		what := "ResourceClaim " + c.Namespace + "/" + c.Name
		subdomain("ResourceClaim", c.Name)
		label(what+" namespace", c.Namespace)
		requests := map[string]bool{}
		for _, r := range c.Spec.Devices.Requests {
			label(what+" request", r.Name)
			requests[r.Name] = true
			if r.Exactly != nil {
				subdomain(what+" deviceClassName", r.Exactly.DeviceClassName)
			}
		}
		for _, k := range c.Spec.Devices.Constraints {
			for _, r := range k.Requests {
				if !requests[r] {
					out = append(out, fmt.Sprintf("%s: constraint names request %q, which does not exist", what, r))
				}
			}
			if k.MatchAttribute != nil {
				qualified(what+" matchAttribute", string(*k.MatchAttribute))
			}
		}
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if !requests[r.Request] {
				out = append(out, fmt.Sprintf("%s: allocation result for request %q, which does not exist", what, r.Request))
			}
			subdomain(what+" allocation driver", r.Driver)
			pool(what+" allocation pool", r.Pool)
			label(what+" allocation device", r.Device)
			if id := (input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}); !devices[id] {
				out = append(out, fmt.Sprintf("%s: allocated device %s is not published", what, id))
			}
		}
	}
	return out
}

// TestMIGPicturesLabelProfiles: the per-GPU pictures label placements with
// the profile attribute (the profile's real name, not the device name).
func TestMIGPicturesLabelProfiles(t *testing.T) {
	// Pictures carry the profile attribute, and label with it.
	in := genMIG(t, "mixed", Size{Nodes: 2, GPUs: 2, Claims: 10}, 3)
	w := newWorld(in.Objs)
	x := indexDevices(in.Objs)
	labelled := 0
	for _, g := range w.pictures(in.Objs, nil, true) {
		for _, u := range g.Slices {
			if u.Claim == "" {
				continue
			}
			id := input.DeviceID{Driver: gen.NVIDIADriver, Pool: strings.Split(g.GPU, "/")[0], Device: u.Device}
			if p := x.str(id, "profile"); u.Profile != p || profileLabel(u) != p || p == "" {
				t.Errorf("%s slice of %s: profile %q, label %q, want the attribute %q", g.GPU, u.Device, u.Profile, profileLabel(u), p)
			}
			labelled++
		}
	}
	if labelled == 0 {
		t.Error("no running allocation pictured")
	}
	if l := profileLabel(SliceUse{Claim: "c", Device: "gpu-3"}); l != "full" {
		t.Errorf("a device without profile is labelled %q, want full", l)
	}
}
