package model

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/drasat/drasat/input"
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
	env := newCELEnv(context.Background(), 0)
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

// celTestDevices generates devices that often agree on what an expression
// reads and differ elsewhere: few drivers and domains, small value sets,
// qualified and unqualified names, missing and broken attributes, name
// collisions, capacities with equal values in different representations.
func celTestDevices(rng *rand.Rand, n int) []*Device {
	drivers := []string{"gpu.example.com", "net.example.com", "x.io"}
	domains := []string{"gpu.example.com", "net.example.com", "other.io"}
	ids := []string{"type", "profile", "count", "flag", "ver", "tags"}
	strs := []string{"mig", "gpu", "1g", "2g", "", "1", "true"}
	vers := []string{"1.2.0", "1.10.0", "2.0.0-rc.1", "1.2.0+build"}
	quantities := []string{"1Gi", "1024Mi", "0.3", "300m", "1k", "1000", "2", "0", "0.0000000000000000001", "1n", "1.5Ki"}
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	// Each id mostly has one type (as real drivers do), sometimes another.
	kinds := map[string]int{"type": 0, "profile": 1, "count": 3, "flag": 5, "ver": 6, "tags": 7}
	value := func(id string) resourceapi.DeviceAttribute {
		kind := kinds[id]
		if rng.Intn(4) == 0 {
			kind = rng.Intn(12)
		}
		switch kind {
		case 0, 1, 2:
			return resourceapi.DeviceAttribute{StringValue: ptr.To(pick(strs))}
		case 3, 4:
			return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.Intn(4)))}
		case 5:
			return resourceapi.DeviceAttribute{BoolValue: ptr.To(rng.Intn(2) == 0)}
		case 6:
			return resourceapi.DeviceAttribute{VersionValue: ptr.To(pick(vers))}
		case 7:
			l := []string{}
			for range rng.Intn(3) {
				l = append(l, pick(strs))
			}
			return resourceapi.DeviceAttribute{StringValues: l}
		case 8:
			l := []int64{}
			for range rng.Intn(3) {
				l = append(l, int64(rng.Intn(3)))
			}
			return resourceapi.DeviceAttribute{IntValues: l}
		case 9:
			return resourceapi.DeviceAttribute{BoolValues: []bool{rng.Intn(2) == 0}}
		case 10:
			return resourceapi.DeviceAttribute{VersionValues: []string{pick(vers)}}
		default: // two fields set: the first in getAttributeValue's order wins
			return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.Intn(2))), StringValue: ptr.To(pick(strs))}
		}
	}
	var devs []*Device
	for i := range n {
		driver := pick(drivers)
		name := func(domain, id string) resourceapi.QualifiedName {
			if domain == driver && rng.Intn(2) == 0 {
				return resourceapi.QualifiedName(id)
			}
			return resourceapi.QualifiedName(domain + "/" + id)
		}
		spec := &resourceapi.Device{
			Name:       fmt.Sprintf("dev-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr.To(fmt.Sprint("uuid-", i))}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
		}
		switch rng.Intn(3) {
		case 0:
			spec.AllowMultipleAllocations = ptr.To(true)
		case 1:
			spec.AllowMultipleAllocations = ptr.To(false)
		}
		for _, domain := range domains {
			for _, id := range ids {
				if rng.Intn(3) > 0 {
					continue
				}
				v := value(id)
				spec.Attributes[name(domain, id)] = v
				if domain == driver && rng.Intn(30) == 0 {
					// The same domain and id twice, with the same value so
					// that CEL's answer does not depend on map order.
					spec.Attributes[resourceapi.QualifiedName(id)] = v
					spec.Attributes[resourceapi.QualifiedName(domain+"/"+id)] = v
				}
			}
			for _, id := range []string{"memory", "slots"} {
				if rng.Intn(2) == 0 {
					spec.Capacity[name(domain, id)] = resourceapi.DeviceCapacity{Value: resource.MustParse(pick(quantities))}
				}
			}
		}
		switch rng.Intn(40) {
		case 0: // DeviceMatches fails on this device, whatever the expression
			spec.Attributes["broken"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("not-a-version")}
		case 1:
			spec.Attributes["empty"] = resourceapi.DeviceAttribute{}
		}
		devs = append(devs, &Device{Index: i, ID: input.DeviceID{Driver: driver, Pool: "pool", Device: spec.Name}, Spec: spec})
	}
	return devs
}

// TestCELProjectionMatchesDirect checks the memoised answers against a direct
// DeviceMatches evaluation of every device.
func TestCELProjectionMatchesDirect(t *testing.T) {
	exprs := []struct {
		expr        string
		projectable bool
	}{
		{"device.driver == 'gpu.example.com'", true},
		{".device.driver == 'x.io' || device.allowMultipleAllocations", true},
		{"device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'mig'", true},
		{"device.attributes['gpu.example.com'].profile == '1g'", true},
		{"has(device.attributes['gpu.example.com'].profile) && device.attributes['gpu.example.com'].profile == '1g'", true},
		{"has(device.attributes['other.io'].type)", true},
		{"device.attributes['net.example.com']['count'] > 1", true},
		{"has(device.attributes['net.example.com'].count) && device.attributes['net.example.com'].count == 1", true},
		{"has(device.attributes['gpu.example.com'].type) && device.attributes['gpu.example.com'].type == true", true},
		{"1 == 1", true},
		{"device.attributes['gpu.example.com'].flag == true || device.attributes['other.io'].type == 'gpu'", true},
		{"device.attributes['gpu.example.com'].ver.isGreaterThan(semver('1.5.0'))", true},
		{"device.attributes['net.example.com'].ver == semver('1.2.0')", true},
		{"device.attributes['gpu.example.com'].tags.exists(t, t == 'mig')", true},
		{"'mig' in device.attributes['gpu.example.com'].tags", true},
		{"device.attributes['gpu.example.com'].tags == [1]", true},
		{"device.capacity['gpu.example.com'].memory.compareTo(quantity('1Gi')) >= 0", true},
		{"device.capacity['gpu.example.com'].memory.asApproximateFloat() == 0.3", true},
		{"has(device.capacity['net.example.com'].slots) && device.capacity['net.example.com'].slots.isInteger()", true},
		{"device.capacity['gpu.example.com'].memory.add(device.capacity['net.example.com'].slots).asApproximateFloat() > 1.0", true},
		{"device.capacity['other.io'].slots.add(device.capacity['other.io'].memory).asApproximateFloat() == 1.3", true},
		// runtime errors
		{"int(device.attributes['gpu.example.com'].type) > 0", true},
		{"device.attributes['gpu.example.com'].count / (device.attributes['net.example.com'].count - 1) == 1", true},
		// not projectable
		{"device.attributes['gpu.example.com'].exists(k, k == 'type')", false},
		{"size(device.attributes['gpu.example.com']) > 0", false},
		{"'type' in device.attributes['net.example.com']", false},
		{"device.attributes.exists(d, d == 'other.io')", false},
		{"device.attributes[device.driver].type == 'mig'", false},
		{"cel.bind(g, device.attributes['gpu.example.com'], g.type == 'mig')", false},
	}
	rng := rand.New(rand.NewSource(1))
	devs := celTestDevices(rng, 600)
	direct := newCELEnv(context.Background(), 0)
	for _, tt := range exprs {
		if err := direct.compile(tt.expr); err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		want := make([]string, len(devs))
		for i, d := range devs {
			ok, err := direct.eval(tt.expr, d.ID.Driver, d.Spec)
			want[i] = fmt.Sprint(ok, err)
		}
		// Several orders, so that different devices stand for a key.
		for round := range 3 {
			e := newCELEnv(context.Background(), 0)
			for _, i := range rng.Perm(len(devs)) {
				ok, err := e.matches(tt.expr, devs[i], len(devs))
				if got := fmt.Sprint(ok, err); got != want[i] {
					t.Fatalf("%s on %s (%v): memoised %s, direct %s", tt.expr, devs[i].Spec.Name, devs[i].Spec.Attributes, got, want[i])
				}
			}
			if round == 0 {
				t.Logf("%4d evaluations for %d devices: %s", e.evals, len(devs), tt.expr)
			}
			if e.exprs[tt.expr].ok != tt.projectable || (!tt.projectable && e.evals != len(devs)) {
				t.Errorf("%s: projectable %v, %d evaluations for %d devices", tt.expr, !tt.projectable, e.evals, len(devs))
			}
		}
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

// Devices holding the same maps (as slices read from files do) share one
// CEL view and its answers; the answers stay those of evaluating each
// device, also across drivers and allowMultipleAllocations, which the
// shared maps do not carry.
func TestCELSharedMapsMatchDirect(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	devs := celTestDevices(rng, 300)
	for i := range devs {
		if i%3 != 0 {
			// Share the maps of an earlier device; keep the driver and
			// allowMultipleAllocations of this one.
			j := rng.Intn(i)
			devs[i].Spec.Attributes, devs[i].Spec.Capacity = devs[j].Spec.Attributes, devs[j].Spec.Capacity
		}
	}
	exprs := []string{
		"device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'mig'",
		".device.driver == 'x.io' || device.allowMultipleAllocations",
		"device.attributes['gpu.example.com'].profile == '1g'",
		"device.capacity['gpu.example.com'].memory.asApproximateFloat() == 0.3",
		"int(device.attributes['gpu.example.com'].type) > 0",
	}
	direct := newCELEnv(context.Background(), 0)
	for _, expr := range exprs {
		if err := direct.compile(expr); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		e := newCELEnv(context.Background(), 0)
		for _, i := range rng.Perm(len(devs)) {
			want, werr := direct.eval(expr, devs[i].ID.Driver, devs[i].Spec)
			got, gerr := e.matches(expr, devs[i], len(devs))
			if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
				t.Fatalf("%s on %s: memoised %v %v, direct %v %v", expr, devs[i].Spec.Name, got, gerr, want, werr)
			}
		}
		if len(e.byMaps) >= len(devs) {
			t.Fatalf("%d CEL views for %d devices: none shared", len(e.byMaps), len(devs))
		}
	}
}
