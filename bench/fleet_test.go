package bench

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The GPU fleets of the mig scenario: --mig-gpu a100 (default), h100 and
// mixed.

func genMIG(t *testing.T, fleet string, sz Size, seed uint64) *Instance {
	t.Helper()
	insts, err := Generate("mig", sz, seed, GenerateOptions{MIGGPU: fleet})
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
	return insts[0]
}

func TestMIGFleetNames(t *testing.T) {
	sz := Size{Nodes: 8, GPUs: 8, Claims: 300}
	for fleet, want := range map[string]string{"": "mig 8x8:300", "a100": "mig 8x8:300", "h100": "mig 8x8:300 h100", "mixed": "mig 8x8:300 mixed"} {
		if got := genMIG(t, fleet, sz, 1).Name(); got != want {
			t.Errorf("fleet %q: instance %q, want %q", fleet, got, want)
		}
	}
	for _, bad := range []string{"a10", "H100x", "both"} {
		_, err := Generate("mig", sz, 1, GenerateOptions{MIGGPU: bad})
		if err == nil || !strings.Contains(err.Error(), "a100, h100, mixed") {
			t.Errorf("fleet %q: err = %v, want one naming a100, h100, mixed", bad, err)
		}
	}
	_, err := Run(context.Background(), Config{Scenarios: []string{"mig"}, MIGGPU: "v100", Policies: []string{PolicyFirstFit}})
	if err == nil || !strings.Contains(err.Error(), `"v100"`) {
		t.Errorf("Run with fleet v100: err = %v", err)
	}
	// The other scenarios ignore the fleet.
	insts, err := Generate("tpu", Size{Nodes: 16, Claims: 4}, 1, GenerateOptions{MIGGPU: "mixed"})
	if err != nil || insts[0].Name() != "tpu 16:4" {
		t.Errorf("tpu with a mig fleet: %v %v", insts, err)
	}
}

// TestMIGDefaultFleetUnchanged: the a100 fleet is the generator's default
// instance family, and its claims select on the profile alone.
func TestMIGDefaultFleetUnchanged(t *testing.T) {
	sz := Size{Nodes: 3, GPUs: 4, Claims: 80}
	a, def := genMIG(t, "a100", sz, 5), genMIG(t, "", sz, 5)
	plain := gen.MIG(gen.DefaultMIG(3, 4, 80, 5))
	if !reflect.DeepEqual(a.Objs, plain) || !reflect.DeepEqual(def.Objs, plain) {
		t.Fatal("the a100 fleet differs from MIG(DefaultMIG(...))")
	}
	for _, c := range plain.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if len(r.Exactly.Selectors) != 1 || strings.Contains(r.Exactly.Selectors[0].CEL.Expression, "productName") {
				t.Fatalf("claim %s: selectors %v, want the profile alone", c.Name, r.Exactly.Selectors)
			}
		}
	}
}

// deviceIndex maps devices to their attributes and counter consumption.
type deviceIndex struct {
	attrs map[input.DeviceID]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	cons  map[input.DeviceID]map[string]int64
	node  map[input.DeviceID]string
}

func indexDevices(objs *input.Objects) deviceIndex {
	x := deviceIndex{attrs: map[input.DeviceID]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		cons: map[input.DeviceID]map[string]int64{}, node: map[input.DeviceID]string{}}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			id := input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}
			x.attrs[id] = d.Attributes
			x.node[id] = *s.Spec.NodeName
			x.cons[id] = map[string]int64{}
			for _, cc := range d.ConsumesCounters {
				for n, c := range cc.Counters {
					x.cons[id][n] += c.Value.Value()
				}
			}
		}
	}
	return x
}

func (x deviceIndex) str(id input.DeviceID, attr resourceapi.QualifiedName) string {
	if a, ok := x.attrs[id][attr]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func modelByName(t *testing.T, name string) *gen.GPUModel {
	t.Helper()
	for _, gm := range []*gen.GPUModel{&gen.A100, &gen.H100} {
		if gm.Name == name {
			return gm
		}
	}
	t.Fatalf("unknown GPU model %q", name)
	return nil
}

// TestMIGFleetObjects: the a100, h100 and mixed fleets publish each GPU as
// its own model (attributes, counter set, per-profile consumption), their
// slices pass the API-like validator without a finding, and their running
// allocations pass the independent checker.
func TestMIGFleetObjects(t *testing.T) {
	for _, fleet := range []string{"a100", "h100", "mixed"} {
		for _, seed := range []uint64{1, 2, 3} {
			in := genMIG(t, fleet, Size{Nodes: 4, GPUs: 8, Claims: 200}, seed)
			objs := in.Objs
			fs, err := model.Validate(context.Background(), objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				t.Errorf("%s seed %d: %s", in.Name(), seed, f)
			}
			if err := check.CheckAll(objs, check.Options{}); err != nil {
				t.Errorf("%s seed %d: running allocations: %v", in.Name(), seed, err)
			}

			products := map[string]string{} // node -> label
			for _, n := range objs.Nodes {
				products[n.Name] = n.Labels["nvidia.com/gpu.product"]
				if products[n.Name] == gen.ProductLabel(gen.A100.Name) {
					products[n.Name] = gen.A100.Name
				} else if products[n.Name] == gen.ProductLabel(gen.H100.Name) {
					products[n.Name] = gen.H100.Name
				}
			}
			seen := map[string]int{}
			for _, n := range objs.Nodes {
				seen[products[n.Name]]++
			}
			want := map[string]map[string]int{"a100": {gen.A100.Name: 4}, "h100": {gen.H100.Name: 4}, "mixed": {gen.A100.Name: 2, gen.H100.Name: 2}}[fleet]
			if !reflect.DeepEqual(seen, want) {
				t.Errorf("%s: nodes per model %v, want %v", in.Name(), seen, want)
			}
			for _, s := range objs.Slices {
				gm := modelByName(t, products[*s.Spec.NodeName])
				for _, cs := range s.Spec.SharedCounters {
					for name, want := range map[string]int64{"memory": gm.MemoryMi << 20, "multiprocessors": gm.SMs, "copy-engines": gm.CopyEng,
						"decoders": gm.Decoders, "jpeg-engines": gm.JPEG, "ofa-engines": gm.OFA, "memory-slice-7": 1} {
						if got := cs.Counters[name]; got.Value.Value() != want {
							t.Errorf("%s: %s/%s: %s = %s, want %d (%s)", in.Name(), s.Name, cs.Name, name, got.Value.String(), want, gm.Name)
						}
					}
				}
			}
			x := indexDevices(objs)
			for id := range x.attrs {
				gm := modelByName(t, products[x.node[id]])
				if p, a := x.str(id, "productName"), x.str(id, "architecture"); p != gm.Name || a != gm.Architecture {
					t.Fatalf("%s: %v on a %s node: productName %q architecture %q", in.Name(), id, gm.Name, p, a)
				}
				prof := x.str(id, "profile")
				if x.str(id, "type") == "gpu" {
					// A whole GPU has no profile and consumes its whole counter set.
					if prof != "" || x.cons[id]["multiprocessors"] != gm.SMs || x.cons[id]["memory"] != gm.MemoryMi<<20 {
						t.Fatalf("%s: whole GPU %v: profile %q, consumes %v", in.Name(), id, prof, x.cons[id])
					}
					continue
				}
				pr := gm.Profile(prof)
				if pr == nil {
					t.Fatalf("%s: %v: profile %q is not a %s profile", in.Name(), id, prof, gm.Name)
				}
				c := x.cons[id]
				slices := 0
				for n := range c {
					if memorySlices(n) {
						slices++
					}
				}
				if slices != pr.Slices || c["multiprocessors"] != pr.SMs || c["jpeg-engines"] != pr.JPEG || c["decoders"] != pr.Decoders ||
					c["ofa-engines"] != pr.OFA || c["copy-engines"] != pr.CopyEng || c["memory"] != pr.MemoryMi<<20 {
					t.Fatalf("%s: %v consumes %v, want %s %s %+v", in.Name(), id, c, gm.Name, pr.Name, *pr)
				}
			}
		}
	}
}

var productSelectorRE = regexp.MustCompile(`\.productName == '([^']+)'`)

// requestedModel is the GPU model a mixed-fleet request selects.
func requestedModel(t *testing.T, c *resourceapi.ResourceClaim, request string) string {
	t.Helper()
	for _, r := range c.Spec.Devices.Requests {
		if r.Name != request {
			continue
		}
		var models []string
		for _, s := range r.Exactly.Selectors {
			if m := productSelectorRE.FindStringSubmatch(s.CEL.Expression); m != nil {
				models = append(models, m[1])
			}
		}
		if len(models) != 1 {
			t.Fatalf("claim %s request %s: selects models %v, want exactly one", c.Name, request, models)
		}
		return models[0]
	}
	t.Fatalf("claim %s: no request %s", c.Name, request)
	return ""
}

// TestMIGMixedFleetPolicies runs every policy on small mixed instances:
// each result passes check.Check, and every device a claim gets is of the
// model it asked for, with that model's profile (so an H100 1g.10gb, one
// memory slice, never lands on an A100's two-slice 1g.10gb).
func TestMIGMixedFleetPolicies(t *testing.T) {
	sizes := []Size{{Nodes: 2, GPUs: 4, Claims: 40}}
	if !testing.Short() {
		sizes = append(sizes, Size{Nodes: 4, GPUs: 4, Claims: 90})
	}
	ambiguous := 0 // H100 requests for a profile name the A100 has too
	for _, sz := range sizes {
		for _, seed := range []uint64{1, 2} {
			in := genMIG(t, "mixed", sz, seed)
			x := indexDevices(in.Objs)
			perModel := map[string]int{}
			for _, c := range in.Objs.Claims {
				for _, r := range c.Spec.Devices.Requests {
					m := requestedModel(t, c, r.Name)
					perModel[m]++
					if m == gen.H100.Name && gen.A100.Profile(requestedProfile(t, c, r.Name)) != nil {
						ambiguous++
					}
				}
			}
			if perModel[gen.A100.Name] == 0 || perModel[gen.H100.Name] == 0 {
				t.Fatalf("%s seed %d: requests per model %v, want both", in.Name(), seed, perModel)
			}
			for _, pol := range Policies {
				out, err := runPolicy(context.Background(), pol, in.Objs, in.Compat, 3*time.Second, nil, false, nil)
				if err != nil {
					t.Fatalf("%s %s: %v", in.Name(), pol, err)
				}
				if err := check.Check(in.Objs, out.allocated, check.Options{Compat: in.Compat}); err != nil {
					t.Errorf("%s seed %d %s: %v", in.Name(), seed, pol, err)
				}
				if len(out.allocated) == 0 {
					t.Errorf("%s seed %d %s: nothing allocated", in.Name(), seed, pol)
				}
				onH100 := 0
				for _, c := range out.allocated {
					for _, r := range c.Status.Allocation.Devices.Results {
						id := input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
						want := requestedModel(t, c, r.Request)
						got := x.str(id, "productName")
						if got != want {
							t.Errorf("%s %s: claim %s request %s asks for %s, got %v on a %s", in.Name(), pol, c.Name, r.Request, want, id, got)
							continue
						}
						gm := modelByName(t, got)
						pr := gm.Profile(requestedProfile(t, c, r.Request))
						slices := 0
						for n := range x.cons[id] {
							if memorySlices(n) {
								slices++
							}
						}
						if pr == nil || x.str(id, "profile") != pr.Name || slices != pr.Slices {
							t.Errorf("%s %s: claim %s got %v (%d memory slices), want %s %v", in.Name(), pol, c.Name, id, slices, gm.Name, pr)
						}
						if got == gen.H100.Name {
							onH100++
						}
					}
				}
				if onH100 == 0 {
					t.Errorf("%s seed %d %s: no device allocated on an H100", in.Name(), seed, pol)
				}
			}
		}
	}
	if ambiguous == 0 {
		t.Error("no H100 request for a profile name the A100 has too (1g.10gb): the test shows nothing")
	}
}

var profileSelectorRE = regexp.MustCompile(`\.profile == '([^']+)'`)

func requestedProfile(t *testing.T, c *resourceapi.ResourceClaim, request string) string {
	t.Helper()
	for _, r := range c.Spec.Devices.Requests {
		if r.Name == request {
			for _, s := range r.Exactly.Selectors {
				if m := profileSelectorRE.FindStringSubmatch(s.CEL.Expression); m != nil {
					return m[1]
				}
			}
		}
	}
	t.Fatalf("claim %s request %s: no profile selector", c.Name, request)
	return ""
}

// TestBenchMIGFleets runs the bench on the h100 and mixed fleets (Run
// validates every result): drasat is never behind a baseline, the rows are
// named after the fleet, and units and utilisation agree with the
// placement pictures (eight memory slices per GPU of either model).
func TestBenchMIGFleets(t *testing.T) {
	for _, fleet := range []string{"h100", "mixed"} {
		rep, err := Run(context.Background(), Config{Scenarios: []string{"mig"}, Sizes: map[string][]Size{"mig": {{Nodes: 2, GPUs: 4, Claims: 40}}},
			Seed: 1, Timeout: 3 * time.Second, MIGGPU: fleet})
		if err != nil {
			t.Fatal(err)
		}
		assertDrasatBest(t, rep)
		for _, r := range rep.Rows {
			if r.Instance != "mig 2x4:40 "+fleet {
				t.Errorf("row instance %q", r.Instance)
			}
			if r.Units != 8 || len(r.Picture) != 8 {
				t.Fatalf("%s %s: %d units, %d pictured GPUs, want 8", r.Instance, r.Policy, r.Units, len(r.Picture))
			}
			used, busy := 0, 0
			models := map[string]int{}
			for _, g := range r.Picture {
				models[g.Model]++
				n := 0
				for _, s := range g.Slices {
					if s.Claim != "" {
						n++
					}
				}
				used += n
				if n > 0 {
					busy++
				}
			}
			if util := float64(used) / 64; fmt.Sprintf("%.6f", util) != fmt.Sprintf("%.6f", r.Util) {
				t.Errorf("%s %s: utilisation %.4f, the picture shows %d/64 memory slices", r.Instance, r.Policy, r.Util, used)
			}
			if r.UnitsUsed != busy || r.UnitsFree != 8-busy {
				t.Errorf("%s %s: %d GPUs used, %d free; the picture shows %d busy", r.Instance, r.Policy, r.UnitsUsed, r.UnitsFree, busy)
			}
			want := map[string]map[string]int{"h100": {gen.H100.Name: 8}, "mixed": {gen.A100.Name: 4, gen.H100.Name: 4}}[fleet]
			if !reflect.DeepEqual(models, want) {
				t.Errorf("%s %s: pictured models %v, want %v", r.Instance, r.Policy, models, want)
			}
		}
	}
}
