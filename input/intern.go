package input

import (
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// interner lets the devices read from files share identical attribute,
// capacity and counter maps: a node's GPUs of one model publish the same
// capacities and counters, and its MIG placements of one profile the same
// attributes, so at a thousand nodes most of these maps are copies. Nothing
// writes to a slice's maps once it is read, so sharing is safe. Maps with
// values that have no short exact key (list attributes, capacities with a
// request policy) are kept as they are. Quantities are compared as CEL
// sees them (QuantityKey): 0.3 and 300m print alike but are not
// interchangeable.
type interner struct {
	attrs map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	caps  map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	ctrs  map[string]map[string]resourceapi.Counter
	buf   []byte
	names []string
	// qkeys remembers QuantityKey by the quantity's value: the key spells
	// a big decimal, and a thousand nodes repeat a few quantities a
	// million times. Equal Quantity values have equal keys, so the memo
	// cannot change a key; it stops growing at maxQuantityKeys.
	qkeys map[resource.Quantity]string
}

const maxQuantityKeys = 1 << 14

func (in *interner) quantityKey(q resource.Quantity) string {
	if k, ok := in.qkeys[q]; ok {
		return k
	}
	k := QuantityKey(q)
	if len(in.qkeys) < maxQuantityKeys {
		in.qkeys[q] = k
	}
	return k
}

func newInterner() *interner {
	return &interner{
		attrs: map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		caps:  map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
		ctrs:  map[string]map[string]resourceapi.Counter{},
		qkeys: map[resource.Quantity]string{},
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

// appendSortedKeys returns m's keys in order, in the reused buffer names
// (sortedKeys without the allocation: the interner runs on every device
// read).
func appendSortedKeys[K ~string, V any](names []string, m map[K]V) []string {
	names = names[:0]
	for k := range m {
		names = append(names, string(k))
	}
	slices.Sort(names)
	return names
}

// shared returns the map seen before under the key built in buf, or
// records m under it.
func shared[M any](seen map[string]M, buf []byte, m M) M {
	if prev, ok := seen[string(buf)]; ok {
		return prev
	}
	seen[string(buf)] = m
	return m
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
	in.names = appendSortedKeys(in.names, m)
	for _, k := range in.names {
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
	return shared(in.attrs, in.buf, m)
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
	in.names = appendSortedKeys(in.names, m)
	for _, k := range in.names {
		c := m[resourceapi.QualifiedName(k)]
		if c.RequestPolicy != nil {
			return m
		}
		in.field(k)
		in.field(in.quantityKey(c.Value))
	}
	return shared(in.caps, in.buf, m)
}

func (in *interner) counters(m map[string]resourceapi.Counter) map[string]resourceapi.Counter {
	if len(m) == 0 {
		return m
	}
	in.buf = in.buf[:0]
	in.names = appendSortedKeys(in.names, m)
	for _, k := range in.names {
		c := m[k]
		in.field(k)
		in.field(in.quantityKey(c.Value))
	}
	return shared(in.ctrs, in.buf, m)
}

// ShareDeviceMaps gives objs' slices the sharing Load gives slices read
// from files: equal attribute, capacity and counter maps become one map.
// For objects made in memory (generators), so that they cost what the same
// objects read from a file cost; the model's memo of selector answers is
// kept by map. objs' maps must not be written afterwards.
func ShareDeviceMaps(objs *Objects) {
	in := newInterner()
	for _, s := range objs.Slices {
		in.slice(s)
	}
}
