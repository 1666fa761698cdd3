package check

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/google/uuid"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Consumable capacity, re-derived from the allocator's documented rules
// (k8s.io/api resource/v1 CapacityRequestPolicy, CapacityRequirements)
// and its code in k8s.io/dynamic-resource-allocation v0.37 with
// DRAFractionalCapacityRange on:
//   - every device is checked: a request's capacity.requests must all be
//     capacities of the device; per capacity of the device, the amount
//     consumed is the request (rounded up by the policy), else the policy's
//     default, else the whole value; it must comply with the policy and not
//     exceed the value;
//   - a device with allowMultipleAllocations is shared: each result is a
//     share with a shareID and the consumedCapacity above; the shares'
//     consumption, existing ones included, stays within each value; its
//     counters count once;
//   - other devices carry neither shareID nor consumedCapacity.

// shared tells whether d allows multiple allocations.
func shared(d *device) bool { return d != nil && ptrTrue(d.spec.AllowMultipleAllocations) }

// isShare tells whether a placement is a share of its device rather than a
// holder of it: new results on shared devices, existing results with a
// shareID (as the scheduler's allocated state sees them).
func (p *placement) isShare() bool {
	if p.isNew {
		return shared(p.dev)
	}
	return p.res.ShareID != nil
}

// consumption computes what a request consumes of each capacity of a
// device; ok is false when the device cannot serve it.
func consumption(req *resourceapi.CapacityRequirements, caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) (map[resourceapi.QualifiedName]resource.Quantity, bool, error) {
	var asked map[resourceapi.QualifiedName]resource.Quantity
	if req != nil {
		asked = req.Requests
	}
	for name := range asked {
		if _, ok := caps[name]; !ok {
			return nil, false, nil
		}
	}
	out := map[resourceapi.QualifiedName]resource.Quantity{}
	ok := true
	for name, c := range caps {
		q, has := asked[name]
		var used resource.Quantity
		var err error
		pol := c.RequestPolicy
		switch {
		case !has && pol != nil && pol.Default != nil:
			used = pol.Default.DeepCopy()
		case !has:
			used = c.Value.DeepCopy()
		case pol != nil && pol.ValidRange != nil && pol.ValidRange.Min != nil:
			used, err = stepUp(q, pol.ValidRange)
		case pol != nil && pol.ValidValues != nil:
			used = q.DeepCopy()
			for _, v := range pol.ValidValues {
				if q.Cmp(v) <= 0 {
					used = v.DeepCopy()
					break
				}
			}
		default:
			used = q.DeepCopy()
		}
		if err != nil {
			return nil, false, fmt.Errorf("capacity %s: %w", name, err)
		}
		if used.Sign() < 0 {
			return nil, false, fmt.Errorf("capacity %s: consumed amount %s is negative", name, used.String())
		}
		if !complies(used, pol) || used.Cmp(c.Value) > 0 {
			ok = false
		}
		out[name] = used
	}
	if !ok {
		return nil, false, nil
	}
	return out, true, nil
}

// milliArith: the range is computed in milli units when min, max and step
// are exact in them and the step is at least 1m.
func milliArith(r *resourceapi.CapacityRequestPolicyRange) bool {
	for _, q := range []*resource.Quantity{r.Min, r.Max, r.Step} {
		if q != nil && !exactInMilli(*q) {
			return false
		}
	}
	return r.Step == nil || r.Step.MilliValue() >= 1
}

func exactInMilli(q resource.Quantity) bool {
	return q.Cmp(*resource.NewMilliQuantity(q.MilliValue(), q.Format)) == 0
}

// stepUp rounds q up to min, then to min + n·step.
func stepUp(q resource.Quantity, r *resourceapi.CapacityRequestPolicyRange) (resource.Quantity, error) {
	if q.Cmp(*r.Min) < 0 {
		return r.Min.DeepCopy(), nil
	}
	if r.Step == nil {
		return q.DeepCopy(), nil
	}
	milli := milliArith(r)
	var v, lo, step int64
	if milli {
		if !exactInMilli(q) {
			return resource.Quantity{}, fmt.Errorf("request %s is not exact in milli units", q.String())
		}
		v, lo, step = q.MilliValue(), r.Min.MilliValue(), r.Step.MilliValue()
	} else {
		if q.CmpInt64(math.MaxInt64) > 0 {
			return resource.Quantity{}, fmt.Errorf("request %s exceeds MaxInt64", q.String())
		}
		v, lo, step = q.Value(), r.Min.Value(), r.Step.Value()
	}
	steps := (v - lo) / step
	if (v-lo)%step != 0 {
		steps++
	}
	if lo >= 0 && steps > (math.MaxInt64-lo)/step {
		return resource.Quantity{}, fmt.Errorf("rounding request %s up overflows", q.String())
	}
	up := lo + steps*step
	switch {
	case !milli:
		return *resource.NewQuantity(up, r.Step.Format), nil
	case up%1000 == 0:
		return *resource.NewQuantity(up/1000, r.Step.Format), nil
	default:
		return *resource.NewMilliQuantity(up, r.Step.Format), nil
	}
}

// complies: the default always does; otherwise within validRange (max, step
// grid) or one of validValues.
func complies(q resource.Quantity, pol *resourceapi.CapacityRequestPolicy) bool {
	if pol == nil || pol.Default != nil && q.Cmp(*pol.Default) == 0 {
		return true
	}
	if r := pol.ValidRange; r != nil {
		if r.Max != nil && q.Cmp(*r.Max) > 0 {
			return false
		}
		if r.Step == nil {
			return true
		}
		if milliArith(r) {
			return exactInMilli(q) && (q.MilliValue()-r.Min.MilliValue())%r.Step.MilliValue() == 0
		}
		return (q.Value()-r.Min.Value())%r.Step.Value() == 0
	}
	if len(pol.ValidValues) > 0 {
		for _, v := range pol.ValidValues {
			if q.Cmp(v) == 0 {
				return true
			}
		}
		return false
	}
	return true
}

// checkCapacity: per new result, the device serves the request's capacity
// requests, and shareID and consumedCapacity are as the allocator writes
// them; per device, shares (existing and new) stay within each capacity,
// and a device that is not shared still has the capacity a new result
// needs beside existing shares of it.
func (c *checker) checkCapacity() {
	existing := map[devKey]map[resourceapi.QualifiedName]resource.Quantity{}
	shareIDs := map[devKey]map[string]string{}
	for _, p := range c.placements {
		if p.res.ShareID == nil {
			continue
		}
		k := keyOf(p.res)
		if shareIDs[k] == nil {
			shareIDs[k] = map[string]string{}
		}
		if prev, dup := shareIDs[k][string(*p.res.ShareID)]; dup {
			c.errorf("device %s: shareID %s is used by %s and %s", k, *p.res.ShareID, prev, p)
		}
		shareIDs[k][string(*p.res.ShareID)] = p.String()
		if !p.isNew && !p.admin {
			add(existing, k, p.res.ConsumedCapacity)
		}
	}
	totals := map[devKey]map[resourceapi.QualifiedName]resource.Quantity{} // non-admin shares
	// Admin-access shares: the allocated state does not know them, so later
	// claims never see them. Claims with one on a device come first there:
	// each sees the existing shares, its own, and the other shares of such
	// claims that are not admin access; the rest see every non-admin share.
	own := map[devKey]map[string]map[resourceapi.QualifiedName]resource.Quantity{}
	adminOn := map[devKey]map[string]bool{}
	nonAdmin := map[devKey]map[string]map[resourceapi.QualifiedName]resource.Quantity{} // per device and claim
	var order []*device
	for _, nc := range c.newClaims {
		for _, a := range nc.alts {
			for _, p := range a.placements {
				if p.dev == nil {
					continue
				}
				k := keyOf(p.res)
				prefix := fmt.Sprintf("claim %s: request %s: device %s", nc.key, a.name, k)
				used, ok, err := consumption(a.capacity, p.dev.spec.Capacity)
				switch {
				case err != nil:
					c.errorf("%s: capacity cannot be evaluated: %v", prefix, err)
					continue
				case !ok:
					c.errorf("%s: the device lacks a requested capacity, or the amount violates its requestPolicy or exceeds its value", prefix)
					continue
				}
				if !shared(p.dev) {
					if p.res.ShareID != nil || p.res.ConsumedCapacity != nil {
						c.errorf("%s: shareID and consumedCapacity are only for devices with allowMultipleAllocations", prefix)
					}
					if over := exceeds(p.dev, existing[k], used); over != "" {
						c.errorf("%s: %s", prefix, over)
					}
					continue
				}
				if p.res.ShareID == nil {
					c.errorf("%s: a share of a device with allowMultipleAllocations needs a shareID", prefix)
				} else if _, err := uuid.Parse(string(*p.res.ShareID)); err != nil || len(*p.res.ShareID) != 36 {
					c.errorf("%s: shareID %q is not a UUID", prefix, *p.res.ShareID)
				}
				if !sameQuantities(p.res.ConsumedCapacity, used) {
					c.errorf("%s: consumedCapacity is %v, the request consumes %v", prefix, quantities(p.res.ConsumedCapacity), quantities(used))
				}
				if totals[k] == nil && own[k] == nil {
					order = append(order, p.dev)
				}
				if totals[k] == nil {
					totals[k] = map[resourceapi.QualifiedName]resource.Quantity{}
				}
				if !p.admin {
					add(totals, k, used)
					if nonAdmin[k] == nil {
						nonAdmin[k] = map[string]map[resourceapi.QualifiedName]resource.Quantity{}
					}
					if nonAdmin[k][nc.key] == nil {
						nonAdmin[k][nc.key] = map[resourceapi.QualifiedName]resource.Quantity{}
					}
					for n, q := range used {
						v := nonAdmin[k][nc.key][n]
						v.Add(q)
						nonAdmin[k][nc.key][n] = v
					}
				}
				if own[k] == nil {
					own[k], adminOn[k] = map[string]map[resourceapi.QualifiedName]resource.Quantity{}, map[string]bool{}
				}
				if own[k][nc.key] == nil {
					own[k][nc.key] = map[resourceapi.QualifiedName]resource.Quantity{}
				}
				for n, q := range used {
					v := own[k][nc.key][n]
					v.Add(q)
					own[k][nc.key][n] = v
				}
				if p.admin {
					adminOn[k][nc.key] = true
				}
			}
		}
	}
	for _, d := range order {
		if over := exceeds(d, existing[d.key], totals[d.key]); over != "" {
			c.errorf("device %s: shares together: %s", d.key, over)
		}
		// Each claim with an admin-access share here, the others of them
		// before it: their non-admin shares count.
		for _, claim := range slices.Sorted(maps.Keys(adminOn[d.key])) {
			before := map[devKey]map[resourceapi.QualifiedName]resource.Quantity{}
			add(before, d.key, existing[d.key])
			for other := range adminOn[d.key] {
				if other != claim {
					add(before, d.key, nonAdmin[d.key][other])
				}
			}
			if over := exceeds(d, before[d.key], own[d.key][claim]); over != "" {
				c.errorf("device %s: claim %s with its admin-access share, after the claims with other admin-access shares: %s", d.key, claim, over)
			}
		}
	}
}

// exceeds describes the first capacity of d that existing plus more
// overdraws, or "".
func exceeds(d *device, existing, more map[resourceapi.QualifiedName]resource.Quantity) string {
	names := make([]string, 0, len(d.spec.Capacity))
	for n := range d.spec.Capacity {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		name := resourceapi.QualifiedName(n)
		total := resource.Quantity{}
		if q, ok := existing[name]; ok {
			total.Add(q)
		}
		if q, ok := more[name]; ok {
			total.Add(q)
		}
		if total.Cmp(d.spec.Capacity[name].Value) > 0 {
			value := d.spec.Capacity[name].Value
			return fmt.Sprintf("capacity %s: %s consumed, more than its value %s", n, total.String(), value.String())
		}
	}
	return ""
}

func add(to map[devKey]map[resourceapi.QualifiedName]resource.Quantity, k devKey, qs map[resourceapi.QualifiedName]resource.Quantity) {
	if to[k] == nil {
		to[k] = map[resourceapi.QualifiedName]resource.Quantity{}
	}
	for n, q := range qs {
		sum := to[k][n]
		sum.Add(q)
		to[k][n] = sum
	}
}

// sameQuantities: equal as written (nil for nothing consumed).
func sameQuantities(a, b map[resourceapi.QualifiedName]resource.Quantity) bool {
	if len(a) != len(b) || (len(b) > 0) != (a != nil) {
		return false
	}
	for n, q := range b {
		if x, ok := a[n]; !ok || x.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func quantities(m map[resourceapi.QualifiedName]resource.Quantity) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, string(n))
	}
	sort.Strings(names)
	out := "{"
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		q := m[resourceapi.QualifiedName(n)]
		out += n + ": " + q.String()
	}
	return out + "}"
}
