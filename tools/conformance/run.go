package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Grades of one case.
const (
	Agree         = "agree"
	Disagree      = "disagree"
	Unsupported   = "unsupported"
	NotApplicable = "not applicable"
)

// Verdict is the grade of one case and why.
type Verdict struct {
	Case  string
	Grade string
	Why   string
}

// Drasat is what drasat did with a case, as `drasat allocate` would: Exit
// is the error that makes it exit 1 (bad input), otherwise Rejected holds
// the reason of every pending claim left unallocated.
type Drasat struct {
	Exit      error
	Pending   int
	Allocated []*resourceapi.ResourceClaim // every pending claim, allocated or not
	Admitted  int
	Rejected  map[string]string // claim name to reason
	Warnings  []string
	CheckErr  error // check.Check on the output
}

// unsupportedReason is how drasat says that it refuses a feature.
var unsupportedReason = regexp.MustCompile(`not supported by drasat|drasat does not support`)

// causes maps upstream's error for a case to what drasat's reason (or exit
// error) must mention: the same cause, in drasat's words. An upstream error
// not listed here is a disagreement until it is added.
var causes = []struct{ upstream, drasat *regexp.Regexp }{
	{regexp.MustCompile(`exceeds the claim limit of 32`), regexp.MustCompile(`\b32\b`)},
	{regexp.MustCompile(`asks for all devices, but resource pool .* is currently being updated`), regexp.MustCompile(`incomplete`)},
	{regexp.MustCompile(`invalid resource pools were encountered`), regexp.MustCompile(`invalid`)},
	{regexp.MustCompile(`CEL (compile|runtime) error`), regexp.MustCompile(`CEL|selector`)},
	{regexp.MustCompile(`could not retrieve device class|missing device class name`), regexp.MustCompile(`class`)},
	{regexp.MustCompile(`claim constraint would not be satisfied`), regexp.MustCompile(`matchAttribute|distinctAttribute|constraint`)},
	{regexp.MustCompile(`empty constraint`), regexp.MustCompile(`constraint`)},
	{regexp.MustCompile(`CEL expression empty`), regexp.MustCompile(`selector`)},
	{regexp.MustCompile(`unsupported count mode`), regexp.MustCompile(`allocationMode`)},
	{regexp.MustCompile(`evaluate derived attribute`), regexp.MustCompile(`derived`)},
	{regexp.MustCompile(`capacity`), regexp.MustCompile(`capacity`)},
}

// Grade runs drasat on c and grades it against upstream's outcome.
func Grade(ctx context.Context, c Case) (Verdict, Drasat) {
	v := Verdict{Case: c.Name}
	up, all := c.Upstream.Kind(), c.UpstreamAllFeatures.Kind()
	if up != all {
		// drasat has every feature on; this case's outcome needs one off.
		v.Grade, v.Why = NotApplicable, fmt.Sprintf("upstream: %s with features %v, %s with all features on", up, c.Features, all)
		return v, Drasat{}
	}
	d := RunDrasat(ctx, c)
	if why := unsupported(d); why != "" {
		v.Grade, v.Why = Unsupported, why
		return v, d
	}
	if d.CheckErr != nil {
		v.Grade, v.Why = Disagree, "check: "+d.CheckErr.Error()
		return v, d
	}
	v.Grade = Disagree
	switch up {
	case "all":
		switch {
		case d.Exit != nil:
			v.Why = "upstream allocates every claim, drasat exits: " + d.Exit.Error()
		case d.Admitted < d.Pending:
			v.Why = fmt.Sprintf("upstream allocates every claim, drasat %d of %d: %s", d.Admitted, d.Pending, d.reasons())
		default:
			v.Grade = Agree
		}
	case "none":
		switch {
		case d.Exit != nil:
			v.Why = "upstream allocates nothing without error, drasat exits: " + d.Exit.Error()
		case d.Pending > 0 && d.Admitted == d.Pending:
			v.Why = "upstream allocates nothing, drasat allocates every claim"
		default:
			v.Grade = Agree
		}
	case "error":
		want := causeOf(c.Upstream.Error)
		switch {
		case want == nil:
			v.Why = "upstream error with no known cause pattern: " + c.Upstream.Error
		case d.Exit != nil:
			if want.MatchString(d.Exit.Error()) {
				v.Grade = Agree
			} else {
				v.Why = fmt.Sprintf("upstream: %s; drasat exits without naming the cause (%s): %s", c.Upstream.Error, want, d.Exit)
			}
		case d.Pending > 0 && d.Admitted == d.Pending:
			v.Why = "upstream fails (" + c.Upstream.Error + "), drasat allocates every claim"
		default:
			named := false
			for _, r := range d.Rejected {
				named = named || want.MatchString(r)
			}
			if named {
				v.Grade = Agree
			} else {
				v.Why = fmt.Sprintf("upstream: %s; no reason names the cause (%s): %s", c.Upstream.Error, want, d.reasons())
			}
		}
	}
	return v, d
}

func causeOf(upstreamErr string) *regexp.Regexp {
	for _, c := range causes {
		if c.upstream.MatchString(upstreamErr) {
			return c.drasat
		}
	}
	return nil
}

func unsupported(d Drasat) string {
	if d.Exit != nil && unsupportedReason.MatchString(d.Exit.Error()) {
		return d.Exit.Error()
	}
	for _, name := range sortedKeys(d.Rejected) {
		if unsupportedReason.MatchString(d.Rejected[name]) {
			return name + ": " + d.Rejected[name]
		}
	}
	return ""
}

func (d Drasat) reasons() string {
	var out []string
	for _, name := range sortedKeys(d.Rejected) {
		out = append(out, name+": "+d.Rejected[name])
	}
	return strings.Join(out, "; ")
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Objects turns a case into the objects a user would give drasat: the
// case's Node, classes, slices and claims, and one allocated claim holding
// the allocated state (devices in use, consumed capacity).
func Objects(c Case) []any {
	var objs []any
	// Object names do not matter to the allocator, and the table reuses
	// them (two slices named slice-1 in different pools); in files they
	// would be duplicates, so later ones get a suffix.
	seen := map[string]int{}
	add := func(apiVersion, kind string, o any) {
		b, _ := json.Marshal(o)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // counts beyond 2^53 stay exact
		_ = dec.Decode(&m)
		m["apiVersion"], m["kind"] = apiVersion, kind
		if meta, ok := m["metadata"].(map[string]any); ok {
			name, _ := meta["name"].(string)
			key := kind + "/" + name
			if seen[key]++; seen[key] > 1 {
				meta["name"] = fmt.Sprintf("%s-%d", name, seen[key])
			}
		}
		objs = append(objs, m)
	}
	if c.Node != nil {
		add("v1", "Node", c.Node)
	}
	for _, o := range c.Classes {
		add(resourceapi.SchemeGroupVersion.String(), "DeviceClass", o)
	}
	for _, o := range c.Slices {
		add(resourceapi.SchemeGroupVersion.String(), "ResourceSlice", o)
	}
	for _, o := range c.Claims {
		add(resourceapi.SchemeGroupVersion.String(), "ResourceClaim", o)
	}
	if existing := allocatedState(c); existing != nil {
		add(resourceapi.SchemeGroupVersion.String(), "ResourceClaim", existing)
	}
	return objs
}

// allocatedState is one claim whose allocation holds the case's allocated
// devices (as results of a request "allocated") and its consumed capacity
// (results with a shareID and consumedCapacity).
func allocatedState(c Case) *resourceapi.ResourceClaim {
	if len(c.AllocatedDevices) == 0 && len(c.AllocatedSharedDeviceIDs) == 0 && len(c.AllocatedCapacity) == 0 {
		return nil
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "conformance-allocated-state", Namespace: "default"}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "allocated", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "conformance-allocated-state"}}}
	alloc := &resourceapi.AllocationResult{}
	result := func(id string) resourceapi.DeviceRequestAllocationResult {
		p := strings.SplitN(id, "/", 4)
		for len(p) < 3 {
			p = append(p, "")
		}
		return resourceapi.DeviceRequestAllocationResult{Request: "allocated", Driver: p[0], Pool: p[1], Device: p[2]}
	}
	for _, id := range c.AllocatedDevices {
		alloc.Devices.Results = append(alloc.Devices.Results, result(id))
	}
	withCapacity := map[string]bool{}
	for _, sid := range c.AllocatedSharedDeviceIDs {
		r := result(sid)
		if p := strings.SplitN(sid, "/", 4); len(p) == 4 {
			share := types.UID(p[3])
			r.ShareID = &share
		}
		dev := r.Driver + "/" + r.Pool + "/" + r.Device
		if caps, ok := c.AllocatedCapacity[dev]; ok && !withCapacity[dev] {
			withCapacity[dev] = true
			r.ConsumedCapacity = quantities(caps)
		}
		alloc.Devices.Results = append(alloc.Devices.Results, r)
	}
	for _, dev := range sortedKeysMap(c.AllocatedCapacity) {
		if withCapacity[dev] {
			continue
		}
		r := result(dev)
		share := types.UID("conformance-share")
		r.ShareID, r.ConsumedCapacity = &share, quantities(c.AllocatedCapacity[dev])
		alloc.Devices.Results = append(alloc.Devices.Results, r)
	}
	claim.Status.Allocation = alloc
	return claim
}

func quantities(m map[string]string) map[resourceapi.QualifiedName]resource.Quantity {
	out := map[resourceapi.QualifiedName]resource.Quantity{}
	for k, v := range m {
		out[resourceapi.QualifiedName(k)] = resource.MustParse(v)
	}
	return out
}

func sortedKeysMap[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RunDrasat gives drasat the case's objects as one JSON List on standard
// input and runs what `drasat allocate -f -` runs.
func RunDrasat(ctx context.Context, c Case) Drasat {
	var d Drasat
	list, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": Objects(c)})
	objs, warnings, err := input.Load([]string{"-"}, bytes.NewReader(list))
	if err != nil {
		d.Exit = err
		return d
	}
	d.Warnings = warnings
	if err := input.CheckLimits(objs); err != nil {
		d.Exit = err
		return d
	}
	p, err := model.Build(ctx, objs, model.Options{})
	if err != nil {
		d.Exit = err
		return d
	}
	for _, is := range p.Issues {
		d.Warnings = append(d.Warnings, is.String())
	}
	d.Warnings = append(d.Warnings, p.Warnings...)
	deadline := time.Now().Add(20 * time.Second)
	res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 20 * time.Second, Workers: 1})
	if err != nil {
		d.Exit = err
		return d
	}
	// As drasat allocate: why claims fit nowhere, asked of explain.
	explain.FillReasons(ctx, p, res.Unplaceable, res.Rejected, deadline)
	d.Pending, d.Admitted = res.Stats.Pending, res.Stats.Admitted
	d.Rejected = map[string]string{}
	for i, why := range res.Rejected {
		d.Rejected[p.Claims[i].Obj.Name] = why.Error()
	}
	d.Allocated, err = alloc.Allocated(p, res)
	if err != nil {
		d.Exit = err
		return d
	}
	d.CheckErr = check.Check(objs, d.Allocated, check.Options{})
	return d
}
