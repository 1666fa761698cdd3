package model

import (
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
)

// interner lets the devices read from files share identical attribute,
// capacity and counter maps: a node's GPUs of one model publish the same
// capacities and counters, and its MIG placements of one profile the same
// attributes, so at a thousand nodes most of these maps are copies. Nothing
// writes to a slice's maps once it is read, so sharing is safe. Maps with
// values that have no short exact key (list attributes, capacities with a
// request policy) are kept as they are. Quantities are compared as CEL
// sees them (encodeCELQuantity): 0.3 and 300m print alike but are not
// interchangeable.
type interner struct {
	attrs map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	caps  map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	ctrs  map[string]map[string]resourceapi.Counter
	buf   []byte
	names []string
}

func newInterner() *interner {
	return &interner{
		attrs: map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		caps:  map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
		ctrs:  map[string]map[string]resourceapi.Counter{},
	}
}

// slice replaces s's maps by equal ones seen before.
func (in *interner) slice(s *resourceapi.ResourceSlice) {
	for i := range s.Spec.SharedCounters {
		cs := &s.Spec.SharedCounters[i]
		cs.Counters = in.counters(cs.Counters)
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.Attributes = in.attributes(d.Attributes)
		d.Capacity = in.capacity(d.Capacity)
		for j := range d.ConsumesCounters {
			cc := &d.ConsumesCounters[j]
			cc.Counters = in.counters(cc.Counters)
		}
	}
}

// sorted returns the keys of a map in order, in a reused buffer.
func (in *interner) sorted(keys func(yield func(string) bool)) []string {
	in.names = in.names[:0]
	for k := range keys {
		in.names = append(in.names, k)
	}
	slices.Sort(in.names)
	return in.names
}

// field appends s with its length, so that keys cannot run together.
func (in *interner) field(s string) {
	in.buf = strconv.AppendInt(in.buf, int64(len(s)), 10)
	in.buf = append(in.buf, ':')
	in.buf = append(in.buf, s...)
}

func (in *interner) attributes(m map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	if len(m) == 0 {
		return m
	}
	in.buf = in.buf[:0]
	for _, k := range in.sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(string(k)) {
				return
			}
		}
	}) {
		a := m[resourceapi.QualifiedName(k)]
		if a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil || countSet(a) != 1 {
			// Lists, several values (invalid, reported as read) or none
			// of the scalars the key spells (a field this code does not
			// know): the map is kept as it is, never shared.
			return m
		}
		in.field(k)
		switch {
		case a.IntValue != nil:
			in.buf = append(in.buf, 'i')
			in.field(strconv.FormatInt(*a.IntValue, 10))
		case a.BoolValue != nil:
			in.buf = append(in.buf, 'b')
			in.field(strconv.FormatBool(*a.BoolValue))
		case a.StringValue != nil:
			in.buf = append(in.buf, 's')
			in.field(*a.StringValue)
		case a.VersionValue != nil:
			in.buf = append(in.buf, 'v')
			in.field(*a.VersionValue)
		}
	}
	if prev, ok := in.attrs[string(in.buf)]; ok {
		return prev
	}
	in.attrs[string(in.buf)] = m
	return m
}

func countSet(a resourceapi.DeviceAttribute) int {
	n := 0
	for _, set := range []bool{a.IntValue != nil, a.BoolValue != nil, a.StringValue != nil, a.VersionValue != nil} {
		if set {
			n++
		}
	}
	return n
}

func (in *interner) capacity(m map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	if len(m) == 0 {
		return m
	}
	in.buf = in.buf[:0]
	for _, k := range in.sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(string(k)) {
				return
			}
		}
	}) {
		c := m[resourceapi.QualifiedName(k)]
		if c.RequestPolicy != nil {
			return m
		}
		in.field(k)
		in.field(encodeCELQuantity(c.Value))
	}
	if prev, ok := in.caps[string(in.buf)]; ok {
		return prev
	}
	in.caps[string(in.buf)] = m
	return m
}

func (in *interner) counters(m map[string]resourceapi.Counter) map[string]resourceapi.Counter {
	if len(m) == 0 {
		return m
	}
	in.buf = in.buf[:0]
	for _, k := range in.sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		c := m[k]
		in.field(k)
		in.field(encodeCELQuantity(c.Value))
	}
	if prev, ok := in.ctrs[string(in.buf)]; ok {
		return prev
	}
	in.ctrs[string(in.buf)] = m
	return m
}
