package model

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Each rule of what a request consumes of a capacity (the allocator's
// calculateConsumedCapacity and policy check).
func TestConsumedCapacity(t *testing.T) {
	q := resource.MustParse
	qp := func(s string) *resource.Quantity { return ptr.To(q(s)) }
	rng := func(min, max, step string) *resourceapi.CapacityRequestPolicy {
		r := &resourceapi.CapacityRequestPolicyRange{Min: qp(min)}
		if max != "" {
			r.Max = qp(max)
		}
		if step != "" {
			r.Step = qp(step)
		}
		return &resourceapi.CapacityRequestPolicy{Default: qp(min), ValidRange: r}
	}
	values := &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidValues: []resource.Quantity{q("2"), q("4"), q("8")}}
	tests := []struct {
		name    string
		policy  *resourceapi.CapacityRequestPolicy
		value   string
		request string // "" = not requested
		want    string // consumed; "-" = the device cannot serve it
		err     string
	}{
		{name: "no request, no policy: the whole value", value: "10", want: "10"},
		{name: "no request: the default", value: "10", policy: &resourceapi.CapacityRequestPolicy{Default: qp("3")}, want: "3"},
		{name: "request without policy as is", value: "10", request: "7", want: "7"},
		{name: "request above the value", value: "10", request: "11", want: "-"},
		{name: "below min: min", value: "100G", policy: rng("5G", "", "5G"), request: "1G", want: "5G"},
		{name: "rounded up to the step", value: "100G", policy: rng("5G", "", "5G"), request: "37G", want: "40G"},
		{name: "on the step", value: "100G", policy: rng("5G", "", "5G"), request: "40G", want: "40G"},
		{name: "no step: as is", value: "100G", policy: rng("5G", "", ""), request: "37G", want: "37G"},
		{name: "above max", value: "100G", policy: rng("5G", "50G", "5G"), request: "51G", want: "-"},
		{name: "rounded up past max", value: "100G", policy: rng("5G", "52G", "5G"), request: "51G", want: "-"},
		{name: "milli steps", value: "4", policy: rng("500m", "", "250m"), request: "600m", want: "750m"},
		{name: "integer steps when the range is not exact in milli units", value: "10", policy: rng("1u", "", "2"), request: "2", want: "3"},
		{name: "validValues: the next value", value: "8", policy: values, request: "3", want: "4"},
		{name: "validValues: exact", value: "8", policy: values, request: "8", want: "8"},
		{name: "validValues: above all", value: "8", policy: values, request: "9", want: "-"},
		{name: "negative request without policy", value: "8", request: "-1", err: "negative"},
		{name: "request below milli precision", value: "4", policy: rng("500m", "", "250m"), request: "600u", want: "500m"},
		{name: "request not exact in milli units", value: "4", policy: rng("500m", "", "250m"), request: "600001u", err: "not a representable milli value"},
		{name: "request above MaxInt64", value: "10", policy: rng("1u", "", "2"), request: "10E", err: "exceeds MaxInt64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"c": {Value: q(tt.value), RequestPolicy: tt.policy}}
			var req *resourceapi.CapacityRequirements
			if tt.request != "" {
				req = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"c": q(tt.request)}}
			}
			got, ok, err := ConsumedCapacity(req, caps)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case tt.want == "-":
				if ok {
					t.Fatalf("device serves it (consumes %v), want not", got)
				}
			case !ok:
				t.Fatalf("device cannot serve it, want %s consumed", tt.want)
			default:
				c := got["c"]
				if c.Cmp(q(tt.want)) != 0 {
					t.Fatalf("consumes %s, want %s", c.String(), tt.want)
				}
			}
		})
	}
	// A request for a capacity the device lacks rules it out.
	_, ok, _ := ConsumedCapacity(&resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"other": q("1")}},
		map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"c": {Value: q("1")}})
	if ok {
		t.Error("a device without the requested capacity serves the request")
	}
}

const sharedNIC = `
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-counters}
spec:
  driver: nic.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: ports
    counters: {port: {value: "1"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-nics}
spec:
  driver: nic.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 2}
  devices:
  - name: nic-0
    allowMultipleAllocations: true
    consumesCounters: [{counterSet: ports, counters: {port: {value: "1"}}}]
    capacity:
      bandwidth: {value: 100G}
  - name: nic-1
    consumesCounters: [{counterSet: ports, counters: {port: {value: "1"}}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec:
  selectors:
  - cel: {expression: "device.driver == 'nic.example.com'"}
`

func nicClaim(name, bandwidth string) string {
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + name + `, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: nic
        selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]
        capacity: {requests: {bandwidth: ` + bandwidth + `}}
`
}

func existingNIC(shareID, bandwidth string) string {
	share := ""
	if shareID != "" {
		share = "\n        shareID: " + shareID + "\n        consumedCapacity: {bandwidth: " + bandwidth + "}"
	}
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: nic}
status:
  allocation:
    devices:
      results:
      - request: r
        driver: nic.example.com
        pool: node-1
        device: nic-0` + share + "\n"
}

// Shares of a shared device: the capacity left after existing shares, the
// counters its first share consumes (once), an existing holder without
// shareID, and the state's bookkeeping of shares.
func TestSharedDeviceState(t *testing.T) {
	t.Run("existing shares count against the capacity", func(t *testing.T) {
		p := buildYAML(t, sharedNIC+existingNIC("5f0c2c6e-7f43-4a1b-9a39-4f6a3b1d2e01", "60G")+nicClaim("big", "50G")+nicClaim("small", "40G"))
		nic := p.Devices[0]
		if nic.InUse || !nic.ExistingShared {
			t.Fatalf("nic-0: in use %t, existing shares %t; want shares only", nic.InUse, nic.ExistingShared)
		}
		if got := len(p.Claims[0].Requests[0].Alternatives[0].Candidates); got != 0 {
			t.Errorf("50G beside an existing 60G of 100G: %d candidates, want none", got)
		}
		if got := p.Claims[1].Requests[0].Alternatives[0].Candidates; len(got) != 1 {
			t.Errorf("40G beside an existing 60G of 100G: candidates %v, want nic-0", got)
		}
		// The existing share consumed the port: no new share consumes it
		// again, while nic-1 has none left.
		s := NewState(p)
		small := p.Claims[1].Requests[0].Alternatives[0]
		if !FitsAlone(p, nic) || !s.FitsFor(0, small, true) {
			t.Fatal("a further share of nic-0 must not need its port again")
		}
		if s.Fits(1, true) {
			t.Error("nic-1 fits, but the existing share of nic-0 holds the only port")
		}
	})
	t.Run("first share consumes the counters, once", func(t *testing.T) {
		p := buildYAML(t, sharedNIC+nicClaim("a", "30G")+nicClaim("b", "30G")+nicClaim("c", "50G"))
		s := NewState(p)
		alt := func(i int) *Alternative { return p.Claims[i].Requests[0].Alternatives[0] }
		s.TakeFor(0, alt(0), true)
		if s.Used(0) || int(s.shares[0]) != 1 {
			t.Fatalf("after one share: used %t, shares %d; want a share, not a holder", s.Used(0), int(s.shares[0]))
		}
		if s.Fits(1, true) {
			t.Error("nic-1 fits beside a share of nic-0: the share did not consume the port")
		}
		if !s.FitsFor(0, alt(1), true) {
			t.Fatal("a second share of 30G does not fit in 70G left, or needs the port again")
		}
		s.TakeFor(0, alt(1), true)
		if s.FitsFor(0, alt(2), true) {
			t.Error("50G fits in the 40G left")
		}
		s.ReleaseFor(0, alt(1), true)
		s.ReleaseFor(0, alt(0), true)
		if !s.Fits(1, true) || !s.FitsFor(0, alt(2), true) {
			t.Error("releasing every share did not give back the port and the bandwidth")
		}
	})
	// Three identical claims share one consumption (the match cache): the
	// scaled capacity must still hold two of them, not be capped at the
	// consumption counted once as a counter's value is.
	t.Run("identical claims: the capacity is not capped at one share", func(t *testing.T) {
		p := buildYAML(t, sharedNIC+nicClaim("a", "40G")+nicClaim("b", "40G")+nicClaim("c", "40G"))
		s := NewState(p)
		alt := func(i int) *Alternative { return p.Claims[i].Requests[0].Alternatives[0] }
		s.TakeFor(0, alt(0), true)
		if !s.FitsFor(0, alt(1), true) {
			t.Fatal("a second 40G share does not fit in 60G left")
		}
		s.TakeFor(0, alt(1), true)
		if s.FitsFor(0, alt(2), true) {
			t.Error("a third 40G share fits in the 20G left")
		}
	})
	t.Run("an existing holder without shareID", func(t *testing.T) {
		p := buildYAML(t, sharedNIC+existingNIC("", "")+nicClaim("a", "1G"))
		if !p.Devices[0].InUse {
			t.Fatal("nic-0 is not in use after a result without shareID")
		}
		if got := len(p.Claims[0].Requests[0].Alternatives[0].Candidates); got != 0 {
			t.Errorf("a held shared device is a candidate (%d)", got)
		}
	})
}

// What the API server rejects in capacities is found, and applied as the
// allocator applies it (with a warning), never refused.
func TestCapacityPolicyErrors(t *testing.T) {
	q := resource.MustParse
	qp := func(s string) *resource.Quantity { return ptr.To(q(s)) }
	dev := func(multi bool, p *resourceapi.CapacityRequestPolicy) *resourceapi.Device {
		return &resourceapi.Device{Name: "d", AllowMultipleAllocations: ptr.To(multi),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"c": {Value: q("10"), RequestPolicy: p}}}
	}
	tests := []struct {
		name string
		dev  *resourceapi.Device
		want string
	}{
		{"valid range", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: qp("2"), Max: qp("10"), Step: qp("2")}}), ""},
		{"policy on an exclusive device", dev(false, &resourceapi.CapacityRequestPolicy{Default: qp("2")}), "allowMultipleAllocations must be true"},
		{"both policies", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidValues: []resource.Quantity{q("2")}, ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: qp("2")}}), "exactly one policy"},
		{"no default", dev(true, &resourceapi.CapacityRequestPolicy{ValidValues: []resource.Quantity{q("2")}}), "default: required"},
		{"unsorted values", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidValues: []resource.Quantity{q("4"), q("2")}}), "ascending"},
		{"default not a valid value", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("3"), ValidValues: []resource.Quantity{q("2"), q("4")}}), "not one of the valid values"},
		{"max above the value", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: qp("2"), Max: qp("12")}}), "max: 12 is larger than the capacity value 10"},
		{"default off the grid", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("3"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: qp("2"), Step: qp("2")}}), "the default 3 is not min 2 plus a multiple"},
		{"zero step", dev(true, &resourceapi.CapacityRequestPolicy{Default: qp("2"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: qp("2"), Step: qp("0")}}), "must be greater than zero"},
	}
	for _, tt := range tests {
		got := strings.Join(CapacityPolicyErrors(tt.dev), "; ")
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	// Build applies such a policy with a warning.
	p := buildYAML(t, strings.Replace(sharedNIC, "      bandwidth: {value: 100G}", "      bandwidth: {value: 100G, requestPolicy: {default: 1G, validRange: {min: 2G}}}", 1)+nicClaim("a", "1G"))
	if len(p.Warnings) == 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), "default: 1G is less than min 2G") {
		t.Errorf("warnings %q, want the policy's default below min", p.Warnings)
	}
	if got := p.Claims[0].Requests[0].Alternatives[0].ConsumedCapacity(0)["bandwidth"]; got.Cmp(q("2G")) != 0 {
		t.Errorf("1G under min 2G consumes %s, want 2G", got.String())
	}
}

// wholeCapacityFits is the build's shortcut past ConsumedCapacity for
// requests without capacity requests: where it says so, ConsumedCapacity
// finds the request fits without an error and CapacityPolicyErrors finds
// nothing; where it does not, the full check runs.
func TestWholeCapacityFitsAgrees(t *testing.T) {
	q := resource.MustParse
	dc := func(v string, p *resourceapi.CapacityRequestPolicy) resourceapi.DeviceCapacity {
		return resourceapi.DeviceCapacity{Value: q(v), RequestPolicy: p}
	}
	badDefault := &resourceapi.CapacityRequestPolicy{Default: ptr.To(q("80Gi"))} // above the value: does not fit
	for _, tc := range []struct {
		name  string
		caps  map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
		whole bool
	}{
		{"none", nil, true},
		{"plain values", map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": dc("40Gi", nil), "sm": dc("98", nil)}, true},
		{"zero", map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": dc("0", nil)}, true},
		{"negative", map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": dc("-1", nil)}, false},
		{"a policy", map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": dc("40Gi", badDefault), "sm": dc("98", nil)}, false},
	} {
		if got := wholeCapacityFits(tc.caps); got != tc.whole {
			t.Errorf("%s: wholeCapacityFits %v, want %v", tc.name, got, tc.whole)
			continue
		}
		_, fits, err := ConsumedCapacity(nil, tc.caps)
		errs := CapacityPolicyErrors(&resourceapi.Device{Name: "d", Capacity: tc.caps})
		if tc.whole && (!fits || err != nil || len(errs) > 0) {
			t.Errorf("%s: the shortcut says it fits, ConsumedCapacity %v, %v, policy errors %v", tc.name, fits, err, errs)
		}
		if !tc.whole && fits && err == nil && len(errs) == 0 {
			t.Errorf("%s: the full check finds nothing to check, but the shortcut declined", tc.name)
		}
	}
}
