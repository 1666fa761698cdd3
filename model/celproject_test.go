package model

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestCELPaths(t *testing.T) {
	const g = "gpu.example.com"
	attr := func(domain, id string) celPath { return celPath{"attributes", domain, id} }
	capa := func(domain, id string) celPath { return celPath{"capacity", domain, id} }
	tests := []struct {
		expr  string
		paths []celPath // nil: not projectable
	}{
		{"device.driver == 'gpu.example.com'", []celPath{{field: "driver"}}},
		{".device.driver == 'x'", []celPath{{field: "driver"}}},
		{"device.allowMultipleAllocations", []celPath{{field: "allowMultipleAllocations"}}},
		{"device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'mig'",
			[]celPath{{field: "driver"}, attr(g, "type")}},
		{"device.attributes['gpu.example.com']['type'] == 'mig' || device.attributes['gpu.example.com'].type == 'x'",
			[]celPath{attr(g, "type")}},
		{"has(device.attributes['gpu.example.com'].profile) && device.attributes['gpu.example.com'].profile == '1g'",
			[]celPath{attr(g, "profile")}},
		{"device.capacity['gpu.example.com'].memory.compareTo(quantity('1Gi')) >= 0", []celPath{capa(g, "memory")}},
		{"has(device.capacity['a.io'].slots) && device.capacity['a.io']['slots'].isInteger()", []celPath{capa("a.io", "slots")}},
		{"device.attributes['gpu.example.com'].tags.exists(t, t == 'a')", []celPath{attr(g, "tags")}},
		{"'a' in device.attributes['gpu.example.com'].tags", []celPath{attr(g, "tags")}},
		{"device.attributes['a/b']['c/d'] == 1", []celPath{attr("a/b", "c/d")}},
		{"true", []celPath{}},

		// device used other than through a complete path
		{"device.attributes['gpu.example.com'].exists(k, k == 'type')", nil},
		{"size(device.attributes['gpu.example.com']) > 0", nil},
		{"'type' in device.attributes['gpu.example.com']", nil},
		{"device.attributes.exists(d, d == 'a.io')", nil},
		{"device.attributes[device.driver].type == 'mig'", nil},
		{"device.attributes['gpu.example.com'][device.driver] == 'mig'", nil},
		{"cel.bind(x, device.attributes['gpu.example.com'], x.type == 'mig')", nil},
		{"['a'].exists(device, device == 'a')", nil},
		{"device.driver == 'x' && size(device.capacity) == 0", nil},
		{"has(device.attributes) && device.driver == 'x'", nil},
	}
	env := newCELEnv()
	for _, tt := range tests {
		if err := env.compile(tt.expr); err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		paths, ok := celPaths(env.cache.GetOrCompile(tt.expr).Environment, tt.expr)
		if ok != (tt.paths != nil) || (ok && len(paths)+len(tt.paths) > 0 && !reflect.DeepEqual(paths, tt.paths)) {
			t.Errorf("%s: got %v, %v; want %v", tt.expr, paths, ok, tt.paths)
		}
	}
}

// TestCELQuantityRepresentation: equal quantities held differently must not
// share a key (CEL's asApproximateFloat tells them apart).
func TestCELQuantityRepresentation(t *testing.T) {
	a, b := resource.MustParse("0.3"), resource.MustParse("300m")
	if a.String() != b.String() || a.AsApproximateFloat64() == b.AsApproximateFloat64() {
		t.Fatalf("premise: %s %s %v %v", a.String(), b.String(), a.AsApproximateFloat64(), b.AsApproximateFloat64())
	}
	if encodeCELQuantity(a) == encodeCELQuantity(b) {
		t.Errorf("0.3 and 300m share key %s", encodeCELQuantity(a))
	}
	small, nano := resource.MustParse("0.0000000000000000001"), resource.MustParse("1n")
	if encodeCELQuantity(small) == encodeCELQuantity(nano) {
		t.Errorf("Dec- and int64-backed 1n share key %s", encodeCELQuantity(nano))
	}
	if c := resource.MustParse("1Gi"); encodeCELQuantity(c) != encodeCELQuantity(resource.MustParse("1Gi")) {
		t.Errorf("1Gi: keys differ")
	}
}

func TestCELDeviceShareable(t *testing.T) {
	dev := func(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) *resourceapi.Device {
		return &resourceapi.Device{Name: "d", Attributes: attrs}
	}
	s := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(v)} }
	tests := []struct {
		name  string
		dev   *resourceapi.Device
		share bool
	}{
		{"plain", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"a": s("x"), "b.io/a": s("y")}), true},
		// CEL sees one of the two, depending on map order
		{"collision", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"a": s("x"), "gpu.example.com/a": s("y")}), false},
		{"bad version", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {VersionValue: ptr.To("1.0")}}), false},
		{"bad versions", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {VersionValues: []string{"1.0.0", "x"}}}), false},
		{"no value", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {}}), false},
		// getAttributeValue takes the int first and never parses the version
		{"shadowed bad version", dev(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {IntValue: ptr.To(int64(1)), VersionValue: ptr.To("x")}}), true},
	}
	for _, tt := range tests {
		if got := newCELDevice("gpu.example.com", tt.dev).shareable; got != tt.share {
			t.Errorf("%s: shareable %v, want %v", tt.name, got, tt.share)
		}
	}
}
