package check

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// Devices that share their attribute map share a selector's answer, and
// an error still names the device it was asked for; a device with its own
// map, or another driver, is evaluated on its own.
func TestEvalSharesAnswersByMap(t *testing.T) {
	shared := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}
	other := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("h100")}}
	dev := func(driver, name string, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) *device {
		return &device{key: devKey{driver, "pool", name}, spec: &resourceapi.Device{Name: name, Attributes: attrs}}
	}
	d0, d1 := dev("gpu.example.com", "d0", shared), dev("gpu.example.com", "d1", shared)
	d2 := dev("gpu.example.com", "d2", other)
	d3 := dev("other.example.com", "d3", shared)
	w := newWorld(nil, nil)

	const isA100 = `device.attributes["gpu.example.com"].model == "a100"`
	for _, tc := range []struct {
		d       *device
		want    bool
		wantErr bool // d3's attributes are its own driver's: no such key
	}{{d0, true, false}, {d1, true, false}, {d2, false, false}, {d3, false, true}} {
		if ok, err := w.eval(isA100, tc.d); ok != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: %v, %v; want %v (an error: %v)", tc.d.key, ok, err, tc.want, tc.wantErr)
		}
	}
	if n := len(w.celMemo); n != 3 {
		t.Errorf("%d answers kept for 4 devices of 3 distinct (driver, map); want 3", n)
	}

	const fails = `device.attributes["gpu.example.com"].missing == 1`
	for _, d := range []*device{d0, d1} {
		ok, err := w.eval(fails, d)
		if ok || err == nil || !strings.Contains(err.Error(), "on device "+d.key.String()+": runtime error") {
			t.Errorf("%s: %v, %v; want a runtime error naming the device", d.key, ok, err)
		}
	}
	if _, err := w.eval("device.", d0); err == nil || !strings.Contains(err.Error(), "compile error") || strings.Contains(err.Error(), "on device") {
		t.Errorf("a compile error: %v; want one naming the expression, not a device", err)
	}
}
