package model_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// extraA100Claims: more demand than four A100s hold, so the optimum binds.
func extraA100Claims() string {
	var sb strings.Builder
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&sb, `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: extra-3g-%d, namespace: default}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.20gb'"}}]
`, i)
	}
	for i := 0; i < 2; i++ {
		fmt.Fprintf(&sb, `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: extra-gpu-%d, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
`, i)
	}
	return sb.String()
}

func solve(t *testing.T, objs *input.Objects) (*alloc.Result, []*resourceapi.ResourceClaim) {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	var allocated []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c)
		}
	}
	if err := check.Check(objs, allocated, check.Options{}); err != nil {
		t.Fatalf("checker rejects the allocation: %v", err)
	}
	return res, allocated
}

// An A100 fleet published the draft's way (mixins, consumesCapacityFrom)
// and the v1 way (shared counters) has the same optimum on the same claims.
func TestDraftA100SameOptimumAsV1(t *testing.T) {
	var got [2]alloc.Stats
	for i, dir := range []string{"../examples/mig-a100", "../examples/mig-a100-draft"} {
		objs, _, err := input.Load([]string{dir, "-"}, strings.NewReader(extraA100Claims()))
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && len(objs.Draft) != 2 {
			t.Fatalf("%s: %d draft slices, want 2", dir, len(objs.Draft))
		}
		res, _ := solve(t, objs)
		if !res.Stats.Optimal {
			t.Fatalf("%s: optimum not proven: %+v", dir, res.Stats)
		}
		got[i] = res.Stats
	}
	if got[0].Pending != got[1].Pending || got[0].Admitted != got[1].Admitted {
		t.Fatalf("v1 admits %d/%d, draft %d/%d", got[0].Admitted, got[0].Pending, got[1].Admitted, got[1].Pending)
	}
	if got[0].Admitted == got[0].Pending {
		t.Fatalf("every claim fits (%d): the test does not bind", got[0].Admitted)
	}
}

const draftHead = `apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: kep4815-draft.drasat.dev/v1alpha1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: x.example.com
  nodeName: node-a
  pool: {name: p, generation: 1, resourceSliceCount: 1}
`

func loadDraft(body string) (*input.Objects, error) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(draftHead+body))
	return objs, err
}

func TestDraftErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"reference to another slice", `  devices:
  - name: a
    composite: {consumesCapacityFrom: [{name: elsewhere}]}
`, `field spec.devices[0].composite.consumesCapacityFrom[0].name: no device "elsewhere" in this ResourceSlice`},
		{"two sources", `  devices:
  - {name: a, composite: {}}
  - {name: b, composite: {}}
  - name: c
    composite: {consumesCapacityFrom: [{name: a}, {name: b}]}
`, "field spec.devices[2].composite.consumesCapacityFrom: 2 entries, the draft allows only one"},
		{"cycle", `  devices:
  - {name: a, composite: {consumesCapacityFrom: [{name: b}]}}
  - {name: b, composite: {consumesCapacityFrom: [{name: a}]}}
`, "cycle a -> b -> a"},
		{"unknown mixin", `  devices:
  - {name: a, composite: {includes: [{name: nope}]}}
`, `field spec.devices[0].composite.includes[0].name: no mixin "nope" in this ResourceSlice`},
		{"too many includes", `  deviceMixins: [{name: m, composite: {}}]
  devices:
  - {name: a, composite: {includes: [{name: m},{name: m},{name: m},{name: m},{name: m},{name: m},{name: m},{name: m},{name: m}]}}
`, "9 mixins, the draft allows at most 8"},
		{"basic and composite", `  devices:
  - {name: a, basic: {}, composite: {}}
`, "field spec.devices[0]: basic and composite are both set"},
		{"neither", `  devices:
  - {name: a}
`, "field spec.devices[0]: one of basic or composite is required"},
		{"duplicate device", `  devices:
  - {name: a, basic: {}}
  - {name: a, basic: {}}
`, `field spec.devices[1].name: device "a" is defined twice`},
		{"mixin without composite", `  deviceMixins: [{name: m}]
`, "field spec.deviceMixins[0].composite: required"},
		{"unknown field", `  devices:
  - {name: a, composite: {consumesCounters: []}}
`, `unknown field "spec.devices[0].composite.consumesCounters"`},
		{"v1 capacity form", `  devices:
  - {name: a, composite: {capacity: {memory: {value: 1Gi}}}}
`, `unknown field "spec.devices[0].composite.capacity.memory.value"`},
		{"colliding counter names", `  devices:
  - {name: a, composite: {capacity: {memSlice: {quantity: "1"}, mem_slice: {quantity: "1"}}}}
  - {name: b, composite: {consumesCapacityFrom: [{name: a}], capacity: {memSlice: {quantity: "1"}}}}
`, `map to the same counter "mem-slice"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDraft(tc.body)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "<stdin>#2: ResourceSlice s") {
				t.Fatalf("error %q\nwant it to name the object and contain %q", err, tc.want)
			}
		})
	}
}

// Mixins apply in order, the device's own values last; a device naming
// itself as its source is a source.
func TestDraftMixinOrder(t *testing.T) {
	objs, err := loadDraft(`  deviceMixins:
  - {name: m1, composite: {attributes: {k: {string: one}, j: {string: one}}, capacity: {c: {quantity: "1"}}}}
  - {name: m2, composite: {attributes: {k: {string: two}}}}
  devices:
  - {name: a, composite: {includes: [{name: m1}, {name: m2}], attributes: {j: {string: own}}, consumesCapacityFrom: [{name: a}]}}
`)
	if err != nil {
		t.Fatal(err)
	}
	var dev *resourceapi.Device
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			dev = &s.Spec.Devices[i]
		}
	}
	if dev == nil || *dev.Attributes["k"].StringValue != "two" || *dev.Attributes["j"].StringValue != "own" || capOf(dev, "c") != 1 {
		t.Fatalf("flattened device %+v", dev)
	}
	if len(dev.ConsumesCounters) != 0 {
		t.Fatalf("a self-sourced device consumes %v, want nothing", dev.ConsumesCounters)
	}
}

// nestedDraft: R (4 units) -> M (2 units) -> L1, L2 (1 unit each); X draws
// from R but has no capacity R offers.
const nestedDraft = `  devices:
  - {name: r, composite: {attributes: {kind: {string: r}}, capacity: {units: {quantity: "4"}}}}
  - {name: m, composite: {attributes: {kind: {string: m}}, capacity: {units: {quantity: "2"}}, consumesCapacityFrom: [{name: r}]}}
  - {name: l1, composite: {attributes: {kind: {string: l}}, capacity: {units: {quantity: "1"}}, consumesCapacityFrom: [{name: m}]}}
  - {name: l2, composite: {attributes: {kind: {string: l}}, capacity: {units: {quantity: "1"}}, consumesCapacityFrom: [{name: m}]}}
  - {name: x, composite: {attributes: {kind: {string: x}}, consumesCapacityFrom: [{name: r}]}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: c}
spec: {selectors: [{cel: {expression: "device.driver == 'x.example.com'"}}]}
`

func kindClaims(kinds ...string) string {
	var sb strings.Builder
	for i, k := range kinds {
		fmt.Fprintf(&sb, `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c%d-%s, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: c
        selectors: [{cel: {expression: "device.attributes['x.example.com'].kind == '%s'"}}]
`, i, k, k)
	}
	return sb.String()
}

// The draft's rules on a two-level tree: a device excludes its sources and
// everything below it, even a device drawing nothing (x), and devices below
// a source share its capacity.
func TestDraftNestedExclusion(t *testing.T) {
	for _, tc := range []struct {
		kinds []string
		want  int
	}{
		{[]string{"l", "l"}, 2},           // both leaves fit in m
		{[]string{"l", "l", "m"}, 2},      // m excludes its leaves
		{[]string{"r", "x"}, 1},           // x draws nothing, still excluded by r
		{[]string{"r", "l"}, 1},           // r excludes leaves two levels down
		{[]string{"x", "l", "l", "m"}, 3}, // x, l, l (m excluded by the leaves)
	} {
		t.Run(strings.Join(tc.kinds, "+"), func(t *testing.T) {
			objs, err := loadDraft(nestedDraft + kindClaims(tc.kinds...))
			if err != nil {
				t.Fatal(err)
			}
			res, _ := solve(t, objs)
			if !res.Stats.Optimal || res.Stats.Admitted != tc.want {
				t.Fatalf("admitted %d (optimal %v), want %d", res.Stats.Admitted, res.Stats.Optimal, tc.want)
			}
		})
	}
}

// The checker verifies the draft's rules on the draft objects, not on the
// counters they were flattened to: with the flattening's counters removed,
// the engine allocates r and l together and the checker still refuses.
func TestCheckDraftIndependentOfFlattening(t *testing.T) {
	objs, err := loadDraft(nestedDraft + kindClaims("r", "l"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range objs.Slices {
		s.Spec.SharedCounters = nil
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].ConsumesCounters = nil
		}
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Admitted != 2 {
		t.Fatalf("without counters %d admitted, want 2", res.Stats.Admitted)
	}
	err = check.Check(objs, claims, check.Options{})
	if err == nil || !strings.Contains(err.Error(), "KEP-4815 draft") {
		t.Fatalf("checker: %v, want a KEP-4815 draft violation", err)
	}
}

func capOf(d *resourceapi.Device, name resourceapi.QualifiedName) int64 {
	q := d.Capacity[name].Value
	return q.Value()
}
