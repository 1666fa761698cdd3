package model

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Consumable capacity (DRAConsumableCapacity, on by default since 1.36):
// a device with allowMultipleAllocations may serve several claims, and
// several requests of one claim, as long as the capacity they consume,
// together with what existing allocations consume, stays within the
// device's capacity values. What a request consumes of one capacity is
// decided by the capacity's requestPolicy (docs/semantics.md). The rules
// below follow the scheduler's allocator (k8s.io/dynamic-resource-allocation
// v0.37, CmpRequestOverCapacity and GetConsumedCapacityFromRequest) with
// DRAFractionalCapacityRange on, its 1.37 default.

// CapacityDim is one capacity of a device that allows multiple
// allocations, in exact scaled units (like counters).
type CapacityDim struct {
	Name  resourceapi.QualifiedName
	Value resource.Quantity
	// Free is the value minus what existing allocations consume, in Unit;
	// negative when they already consume more (then nothing fits).
	Free int64
	Unit string
	// FreeShare is what existing allocations leave of Value, as a share
	// of it (below 0 when they overdraw it), in floats computed from the
	// quantities: known also where Free is not kept (a capacity that
	// cannot bind). The fragmentation measure reads it (frag).
	FreeShare float64
}

// errCapacityNotRepresentable and errNegativeCapacity are the allocator's
// two capacity errors: they abort its allocation, so they make the claim
// unallocatable here.
var (
	errCapacityNotRepresentable = errors.New("capacity request cannot be represented in the device's range arithmetic")
	errNegativeCapacity         = errors.New("capacity value is negative")
)

// ConsumedCapacity is what a request with capacity requests req consumes
// of a device with capacities caps: one entry per capacity of the device,
// requested or not. ok is false when the device cannot serve the request
// at all: it lacks a requested capacity, a consumed amount violates the
// requestPolicy, or exceeds the capacity's value. An error means the
// request cannot be evaluated on the device (the allocator aborts).
func ConsumedCapacity(req *resourceapi.CapacityRequirements, caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) (map[resourceapi.QualifiedName]resource.Quantity, bool, error) {
	if req != nil {
		for name := range req.Requests {
			if _, ok := caps[name]; !ok {
				return nil, false, nil
			}
		}
	}
	names := slices.Sorted(maps.Keys(caps))
	consumed := make(map[resourceapi.QualifiedName]resource.Quantity, len(caps))
	for _, name := range names {
		var requested *resource.Quantity
		if req != nil {
			if q, ok := req.Requests[name]; ok {
				requested = &q
			}
		}
		q, err := consumedOne(requested, caps[name])
		if err != nil {
			return nil, false, fmt.Errorf("capacity %q: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, false, fmt.Errorf("capacity %q: %w", name, errNegativeCapacity)
		}
		consumed[name] = q
	}
	for _, name := range names {
		q, c := consumed[name], caps[name]
		if violatesPolicy(q, c.RequestPolicy) || q.Cmp(c.Value) > 0 {
			return nil, false, nil
		}
	}
	return consumed, true, nil
}

// wholeCapacityFits tells, without allocating, that a request without
// capacity requests fits a device with capacities caps, as
// ConsumedCapacity would find: no capacity has a requestPolicy or a
// negative value, so each consumes its whole value, which fits. Most
// devices are such (a MIG device's memory and multiprocessors), and a
// build asks for each of them once per alternative.
func wholeCapacityFits(caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) bool {
	for _, c := range caps {
		if c.RequestPolicy != nil || c.Value.Sign() < 0 {
			return false
		}
	}
	return true
}

// consumedOne: without a request, the policy's default or else the whole
// value; with one, rounded up by validRange (to min, then to min + n·step)
// or validValues (to the smallest valid value not below it).
func consumedOne(requested *resource.Quantity, c resourceapi.DeviceCapacity) (resource.Quantity, error) {
	p := c.RequestPolicy
	if requested == nil {
		if p != nil && p.Default != nil {
			return p.Default.DeepCopy(), nil
		}
		return c.Value.DeepCopy(), nil
	}
	switch {
	case p == nil:
		return requested.DeepCopy(), nil
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		return roundUpRange(*requested, p.ValidRange)
	case p.ValidValues != nil:
		for _, v := range p.ValidValues {
			if requested.Cmp(v) <= 0 {
				return v.DeepCopy(), nil
			}
		}
	}
	return requested.DeepCopy(), nil
}

func roundUpRange(requested resource.Quantity, r *resourceapi.CapacityRequestPolicyRange) (resource.Quantity, error) {
	if requested.Cmp(*r.Min) < 0 {
		return r.Min.DeepCopy(), nil
	}
	if r.Step == nil {
		return requested.DeepCopy(), nil
	}
	if useMilli(r) {
		req, ok := exactMilli(requested)
		if !ok {
			return resource.Quantity{}, fmt.Errorf("%w: request %s is not a representable milli value", errCapacityNotRepresentable, requested.String())
		}
		step, lo := r.Step.MilliValue(), r.Min.MilliValue()
		n := ceilSteps(req-lo, step)
		if n > (math.MaxInt64-lo)/step {
			return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up to the next step passes the milli-value range", errCapacityNotRepresentable, requested.String())
		}
		v := lo + step*n
		if v%1000 == 0 {
			return *resource.NewQuantity(v/1000, r.Step.Format), nil
		}
		return *resource.NewMilliQuantity(v, r.Step.Format), nil
	}
	if requested.CmpInt64(math.MaxInt64) > 0 {
		return resource.Quantity{}, fmt.Errorf("%w: request %s exceeds MaxInt64", errCapacityNotRepresentable, requested.String())
	}
	req, step, lo := requested.Value(), r.Step.Value(), r.Min.Value()
	n := ceilSteps(req-lo, step)
	if lo >= 0 && n > (math.MaxInt64-lo)/step {
		return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up to the next step passes MaxInt64", errCapacityNotRepresentable, requested.String())
	}
	return *resource.NewQuantity(lo+step*n, r.Step.Format), nil
}

// ceilSteps is ⌈added/step⌉ for added ≥ 0, with Go's truncating division
// as the allocator has it.
func ceilSteps(added, step int64) int64 {
	n := added / step
	if added%step != 0 {
		n++
	}
	return n
}

// violatesPolicy: above validRange.max, off the step grid, or not one of
// validValues. The default always complies (the API server guarantees it
// for valid policies, which Build insists on).
func violatesPolicy(q resource.Quantity, p *resourceapi.CapacityRequestPolicy) bool {
	if p == nil {
		return false
	}
	if p.Default != nil && q.Cmp(*p.Default) == 0 {
		return false
	}
	switch {
	case p.ValidRange != nil:
		r := p.ValidRange
		if r.Max != nil && q.Cmp(*r.Max) > 0 {
			return true
		}
		if r.Step != nil {
			var v, step, lo int64
			if useMilli(r) {
				var ok bool
				if v, ok = exactMilli(q); !ok {
					return true
				}
				step, lo = r.Step.MilliValue(), r.Min.MilliValue()
			} else {
				v, step, lo = q.Value(), r.Step.Value(), r.Min.Value()
			}
			return (v-lo)%step != 0
		}
	case len(p.ValidValues) > 0:
		for _, v := range p.ValidValues {
			if q.Cmp(v) == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// useMilli: milli-unit arithmetic when min, max and step are all exact in
// milli units and the step is at least 1m (the allocator's rule with
// DRAFractionalCapacityRange on); 64-bit integers of Value() otherwise.
func useMilli(r *resourceapi.CapacityRequestPolicyRange) bool {
	for i, q := range []*resource.Quantity{r.Min, r.Max, r.Step} {
		if q == nil {
			continue
		}
		m, ok := exactMilli(*q)
		if !ok || (i == 2 && m < 1) {
			return false
		}
	}
	return true
}

// exactMilli is q in milli units when that is exact.
func exactMilli(q resource.Quantity) (int64, bool) {
	m := q.MilliValue()
	return m, q.Cmp(*resource.NewMilliQuantity(m, q.Format)) == 0
}

// CapacityPolicyErrors lists what the API server rejects in a device's
// capacities (k8s.io/kubernetes pkg/apis/resource/validation, v1.37): a
// requestPolicy on a device without allowMultipleAllocations, and
// inconsistent policies. Each entry is "field: message", the field relative
// to the device. The allocator applies such policies as they are, and so
// does drasat; Build warns about them and `drasat validate` reports them.
// Values are printed from copies: String caches its text in the quantity.
func CapacityPolicyErrors(d *resourceapi.Device) []string {
	if wholeCapacityFits(d.Capacity) {
		return nil // nothing below can fail: asked of every device each build
	}
	var out []string
	multi := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
	for _, name := range slices.Sorted(maps.Keys(d.Capacity)) {
		c := d.Capacity[name]
		f := "capacity[" + string(name) + "]"
		if c.Value.Sign() < 0 {
			out = append(out, fmt.Sprintf("%s.value: %s is negative", f, c.Value.String()))
		}
		p := c.RequestPolicy
		if p == nil {
			continue
		}
		f += ".requestPolicy"
		if !multi {
			out = append(out, f+": forbidden: allowMultipleAllocations must be true")
			continue
		}
		if p.Default != nil && p.Default.Sign() < 0 {
			out = append(out, fmt.Sprintf("%s.default: %s is negative", f, str(p.Default)))
		}
		switch {
		case len(p.ValidValues) > 0 && p.ValidRange != nil:
			out = append(out, f+`: exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)
		case len(p.ValidValues) > 0:
			if p.Default == nil {
				out = append(out, f+".default: required when validValues is defined")
				break
			}
			out = append(out, validValuesErrors(*p.Default, c.Value, p.ValidValues, f+".validValues")...)
		case p.ValidRange != nil:
			if p.Default == nil {
				out = append(out, f+".default: required when validRange is defined")
				break
			}
			out = append(out, validRangeErrors(*p.Default, c.Value, p.ValidRange, f+".validRange")...)
		}
	}
	return out
}

// capacityMaxValidValues is the API's CapacityRequestPolicyDiscreteMaxOptions.
const capacityMaxValidValues = 10

func validValuesErrors(def, value resource.Quantity, vs []resource.Quantity, f string) []string {
	var out []string
	if len(vs) > capacityMaxValidValues {
		out = append(out, fmt.Sprintf("%s: %d values, more than %d", f, len(vs), capacityMaxValidValues))
	}
	found := false
	for i, v := range vs {
		if i > 0 && vs[i-1].Cmp(v) >= 0 {
			out = append(out, fmt.Sprintf("%s[%d]: %s: values must be sorted in ascending order, without duplicates", f, i, v.String()))
		}
		if v.Sign() < 0 {
			out = append(out, fmt.Sprintf("%s[%d]: %s is negative", f, i, v.String()))
		}
		if v.Cmp(value) > 0 {
			out = append(out, fmt.Sprintf("%s[%d]: %s is larger than the capacity value %s", f, i, v.String(), value.String()))
		}
		found = found || v.Cmp(def) == 0
	}
	if !found {
		out = append(out, fmt.Sprintf("%s: the default %s is not one of the valid values", f, def.String()))
	}
	return out
}

func validRangeErrors(def, value resource.Quantity, r *resourceapi.CapacityRequestPolicyRange, f string) []string {
	if r.Min == nil {
		return []string{f + ".min: required when validRange is defined"}
	}
	var out []string
	bad := func(field, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s.%s: %s", f, field, fmt.Sprintf(format, args...)))
	}
	if r.Min.Sign() < 0 {
		bad("min", "%s is negative", str(r.Min))
	}
	if r.Min.Cmp(value) > 0 {
		bad("min", "%s is larger than the capacity value %s", str(r.Min), value.String())
	}
	if def.Cmp(*r.Min) < 0 {
		bad("default", "%s is less than min %s", def.String(), str(r.Min))
	}
	if r.Max != nil {
		if r.Min.Cmp(*r.Max) > 0 {
			bad("max", "min %s is larger than max %s", str(r.Min), str(r.Max))
		}
		if r.Max.Cmp(value) > 0 {
			bad("max", "%s is larger than the capacity value %s", str(r.Max), value.String())
		}
		if def.Cmp(*r.Max) > 0 {
			bad("default", "%s is more than max %s", def.String(), str(r.Max))
		}
	}
	if r.Step == nil {
		return out
	}
	if r.Step.Sign() <= 0 {
		bad("step", "%s must be greater than zero", str(r.Step))
		return out
	}
	if one := r.Min.DeepCopy(); true {
		one.Add(*r.Step)
		if one.Cmp(value) > 0 {
			bad("step", "one step %s is larger than the capacity value %s", one.String(), value.String())
		}
	}
	// The grid: default and max must be min + n·step, in the arithmetic the
	// allocator uses for this range.
	onGrid := func(q resource.Quantity) bool {
		if useMilli(r) {
			v, ok := exactMilli(q)
			return ok && (v-r.Min.MilliValue())%r.Step.MilliValue() == 0
		}
		if q.CmpInt64(math.MaxInt64) > 0 || r.Step.CmpInt64(math.MaxInt64) > 0 || r.Min.CmpInt64(math.MaxInt64) > 0 {
			return false
		}
		return (q.Value()-r.Min.Value())%r.Step.Value() == 0
	}
	if !onGrid(def) {
		bad("step", "the default %s is not min %s plus a multiple of the step %s", def.String(), str(r.Min), str(r.Step))
	}
	if r.Max != nil && !onGrid(*r.Max) {
		bad("step", "max %s is not min %s plus a multiple of the step %s", str(r.Max), str(r.Min), str(r.Step))
	}
	return out
}

// deviceCapacity warns about capacity fields the API server would reject
// and lists the capacities of a device that allows multiple allocations.
func (b *builder) deviceCapacity(d *Device) error {
	if errs := CapacityPolicyErrors(d.Spec); len(errs) > 0 {
		b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("%s: device %s: field %s (the API server rejects this; applied as the allocator does)",
			b.origin("ResourceSlice", "", d.Slice.Name), d.Spec.Name, strings.Join(errs, "; field ")))
	}
	if d.MultiAlloc {
		for _, name := range slices.Sorted(maps.Keys(d.Spec.Capacity)) {
			d.Capacity = append(d.Capacity, CapacityDim{Name: name, Value: d.Spec.Capacity[name].Value})
		}
	}
	return nil
}

// addExistingShare records an existing result with a shareID: its
// consumedCapacity counts against the device's capacities.
func (b *builder) addExistingShare(d int, consumed map[resourceapi.QualifiedName]resource.Quantity) {
	if b.existingCap == nil {
		b.existingCap = map[int]map[resourceapi.QualifiedName]resource.Quantity{}
	}
	m := b.existingCap[d]
	if m == nil {
		m = map[resourceapi.QualifiedName]resource.Quantity{}
		b.existingCap[d] = m
	}
	for name, q := range consumed {
		sum := m[name]
		sum.Add(q)
		m[name] = sum
	}
}

// capacityFits is the allocator's capacity check of one device for one
// request, against what existing allocations consume: consumed is
// ConsumedCapacity's answer.
func (b *builder) capacityFits(d *Device, consumed map[resourceapi.QualifiedName]resource.Quantity) bool {
	existing := b.existingCap[d.Index]
	if existing == nil {
		return true // ConsumedCapacity found each amount within its value
	}
	for name, q := range consumed {
		total := q.DeepCopy()
		if e, ok := existing[name]; ok {
			total.Add(e)
		}
		if total.Cmp(d.Spec.Capacity[name].Value) > 0 {
			return false
		}
	}
	return true
}

// scaleCapacities turns the capacities of shared devices, what existing
// allocations consume of them and what every alternative would consume,
// into exact integers per capacity (divided by their greatest common
// divisor), as counters are.
func (b *builder) scaleCapacities() {
	for _, d := range b.p.Devices {
		if len(d.Capacity) == 0 {
			continue
		}
		var users []*altCapacity
		for _, ac := range b.altCaps {
			if ac.consumed[d.Index] != nil {
				users = append(users, ac)
				ac.amounts[d.Index] = make([]int64, len(d.Capacity))
			}
		}
		for j := range d.Capacity {
			dim := &d.Capacity[j]
			dim.FreeShare = 0
			if v := dim.Value.AsApproximateFloat64(); v > 0 {
				e := b.existingCap[d.Index][dim.Name]
				dim.FreeShare = 1 - e.AsApproximateFloat64()/v
				for _, ac := range users {
					q := ac.consumed[d.Index][dim.Name]
					ac.shares[d.Index] = append(ac.shares[d.Index], q.AsApproximateFloat64()/v)
				}
			} else {
				for _, ac := range users {
					ac.shares[d.Index] = append(ac.shares[d.Index], 0)
				}
			}
			// When every share the claims could take fits at once, the
			// capacity cannot bind: it needs no numbers (which may exceed
			// 64 bits, like 10^21).
			free := dim.Value.DeepCopy()
			if e, ok := b.existingCap[d.Index][dim.Name]; ok {
				free.Sub(e)
			}
			all := resource.Quantity{}
			for _, ac := range users {
				for k := 0; k < ac.uses; k++ {
					all.Add(ac.consumed[d.Index][dim.Name])
				}
			}
			if all.Cmp(free) <= 0 {
				dim.Free, dim.Unit = 0, "0"
				continue
			}
			qs := []resource.Quantity{dim.Value, b.existingCap[d.Index][dim.Name]}
			for _, ac := range users {
				qs = append(qs, ac.consumed[d.Index][dim.Name])
			}
			// Not capped at the sum of the consumptions as counters are:
			// an alternative may take several shares of one device.
			units, unit, err := scaleExact(qs)
			if err != nil {
				// Nothing can be proven to fit: the device is not shared.
				b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("device %s: capacity %s: %v; the device is not allocated", d.ID, dim.Name, err))
				dim.Free, dim.Unit = -1, "1"
				continue
			}
			dim.Free, dim.Unit = units[0]-units[1], unit
			for i, ac := range users {
				ac.amounts[d.Index][j] = units[2+i]
			}
		}
	}
}

// str prints a quantity from a copy, leaving the object's cached text alone.
func str(q *resource.Quantity) string {
	c := *q
	return c.String()
}

// CapacityShare is the fraction of shared device d's capacities that
// alternative a consumes, summed over its capacities: a size for the
// heuristics that order claims (0 for devices that are not shared).
func CapacityShare(a *Alternative, d *Device) float64 {
	total := 0.0
	consumed := a.ConsumedCapacity(d.Index)
	for _, c := range d.Capacity {
		if v := c.Value.AsApproximateFloat64(); v > 0 {
			q := consumed[c.Name]
			total += q.AsApproximateFloat64() / v
		}
	}
	return total
}
