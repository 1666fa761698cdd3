package input_test

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/tools/scalegen"
)

// Slices read from files share their identical device maps, and read the
// same as without sharing.
func TestLoadSharesIdenticalDeviceMaps(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 3, GPUs: 2, Claims: 5, Seed: 1})
	var buf bytes.Buffer
	if err := scalegen.WriteYAML(&buf, objs); err != nil {
		t.Fatal(err)
	}
	got, _, err := input.Load([]string{"-"}, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Slices) != len(objs.Slices) {
		t.Fatalf("%d slices read, %d written", len(got.Slices), len(objs.Slices))
	}
	caps, attrs := map[uintptr]bool{}, map[uintptr]bool{}
	devices := 0
	for i, s := range got.Slices {
		// The generator's objects went through YAML and back: the same.
		if !equality.Semantic.DeepEqual(s.Spec, objs.Slices[i].Spec) {
			t.Fatalf("slice %s reads differently", s.Name)
		}
		for _, d := range s.Spec.Devices {
			devices++
			caps[reflect.ValueOf(d.Capacity).Pointer()] = true
			attrs[reflect.ValueOf(d.Attributes).Pointer()] = true
		}
	}
	// As many maps as there are different ones (capacities and counters
	// alike across GPUs; attributes differ per GPU, by its UUID).
	if want := distinct(t, got, func(d resourceapi.Device) any { return d.Capacity }); len(caps) != want {
		t.Errorf("%d devices hold %d capacity maps, %d different", devices, len(caps), want)
	}
	if want := distinct(t, got, func(d resourceapi.Device) any { return d.Attributes }); len(attrs) != want {
		t.Errorf("%d devices hold %d attribute maps, %d different", devices, len(attrs), want)
	}
	if len(caps) >= devices/4 {
		t.Errorf("%d capacity maps for %d devices: nothing shared", len(caps), devices)
	}
}

// distinct counts the different values of f over the devices.
func distinct(t *testing.T, objs *input.Objects, f func(resourceapi.Device) any) int {
	var seen []any
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			v := f(d)
			if !slices.ContainsFunc(seen, func(o any) bool { return equality.Semantic.DeepEqual(o, v) }) {
				seen = append(seen, v)
			}
		}
	}
	return len(seen)
}

// Quantities equal in value but held differently (CEL tells 0.3 and 300m
// apart) do not share a map.
func TestLoadKeepsQuantityRepresentations(t *testing.T) {
	slice := func(name, mem string) string {
		return "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + name + "}\n" +
			"spec: {driver: d.io, pool: {name: " + name + ", generation: 1, resourceSliceCount: 1}, nodeName: node-1, " +
			"devices: [{name: a, capacity: {mem: {value: \"" + mem + "\"}}}]}\n"
	}
	in := slice("s1", "0.3") + "---\n" + slice("s2", "300m") + "---\n" + slice("s3", "0.3")
	objs, _, err := input.Load([]string{"-"}, bytes.NewReader([]byte(in)))
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(i int) uintptr { return reflect.ValueOf(objs.Slices[i].Spec.Devices[0].Capacity).Pointer() }
	if ptr(0) == ptr(1) {
		t.Error("0.3 and 300m share a capacity map")
	}
	if ptr(0) != ptr(2) {
		t.Error("two capacities of 0.3 do not share their map")
	}
}

// Attribute maps that differ only in a list value (versions, ints,
// strings, bools) are never shared: each device reads back its own
// values. (A list of versions once fell through to an empty key, and two
// devices with different versions read as one.)
func TestLoadKeepsListAttributesApart(t *testing.T) {
	lists := map[string][2]string{
		"versions": {`["1.0.0", "2.0.0"]`, `["3.0.0"]`},
		"ints":     {`[1]`, `[2]`},
		"strings":  {`["a"]`, `["b"]`},
		"bools":    {`[true]`, `[false]`},
	}
	for kind, vals := range lists {
		in := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: driver-a
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  nodeName: node-1
  devices:
  - {name: d1, attributes: {l: {%[1]s: %[2]s}, model: {string: x}}}
  - {name: d2, attributes: {l: {%[1]s: %[3]s}, model: {string: x}}}
`, kind, vals[0], vals[1])
		got, _, err := input.Load([]string{"-"}, strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		devs := got.Slices[0].Spec.Devices
		if equality.Semantic.DeepEqual(devs[0].Attributes["l"], devs[1].Attributes["l"]) {
			t.Errorf("%s: d1 and d2 read the same list %+v", kind, devs[1].Attributes["l"])
		}
	}
}
