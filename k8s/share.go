package k8s

import (
	"encoding/json"
	"hash/maphash"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
)

// deviceMaps shares, among the cached ResourceSlices, what many devices
// carry with the same contents. Decoded, each device holds its own copy of
// everything; measured on the MIG slices of 200 nodes, the devices' maps
// were most of the cache (docs/adapter.md, Memory). Shared are:
//
//   - a device's capacity (every MIG device of one profile has the same),
//     the counters it consumes (the same for one placement on every GPU
//     of every node, and so is the list of what it consumes), and the
//     counters a slice's counter sets hold (the same for every GPU of a
//     model);
//   - a device's whole attribute map where an equal one was seen: the MIG
//     devices of one profile on one GPU have the same attributes (their
//     parent's UUID, not one of their own), and a driver whose devices
//     carry no UUID has the same map on every node. A map entry is 144
//     bytes (a DeviceAttribute has four pointers and four slices), so a
//     map of ten attributes is 2.7 KB;
//   - in the attribute maps not shared whole, the names and the values the
//     attributes point to (productName, driverVersion, profile, ...: the
//     same on many devices);
//   - the names of counter sets, and device names (gpu-0-mig-1g5gb-0
//     on every node).
//
// Shared values are read-only like everything in an informer's cache:
// drasat never modifies a cached object. Every device's attributes and
// names read exactly as decoded (reflect.DeepEqual), which
// TestDeviceAttributesShared checks; capacity and counter maps are
// shared by their JSON, equal as quantities (and exactly, for the
// canonical quantities the API server serves).
//
// Go's unique package is not used for the strings: the attributes hold
// pointers (*string, *int64), which it does not give, and it drops a
// canonical value once no unique.Handle refers to it, so slices decoded
// after a garbage collection would not share with the cache's (which holds
// strings, not handles).
type deviceMaps struct {
	mu       sync.Mutex
	capacity map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	counters map[string]map[string]resourceapi.Counter
	// consumes: a device's list of counter consumptions, by its counter
	// sets and counter maps (consumption).
	consumes map[string][]resourceapi.DeviceCounterConsumption
	// attrs: attribute maps by their hash (attrHash); equal hashes are
	// told apart by equalAttributes.
	attrs  map[uint64][]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	nAttrs int
	// strs: a canonical pointer for each string seen (attribute names
	// and values, counter set and device names).
	strs map[string]*string
	ints map[int64]*int64
	// bools: false and true.
	bools [2]*bool

	seed maphash.Seed
	keys []string // attrHash's buffer
}

// maxSharedMaps bounds what deviceMaps remembers (maps and values): past
// it, it starts over (sharing less until they are seen again, never
// wrongly), so the values of slices long deleted are not kept forever.
const maxSharedMaps = 1 << 14

func newDeviceMaps() *deviceMaps { return &deviceMaps{seed: maphash.MakeSeed()} }

func (m *deviceMaps) size() int {
	return len(m.capacity) + len(m.counters) + len(m.consumes) + m.nAttrs + len(m.strs) + len(m.ints)
}

// share replaces what s's devices carry with equal values already seen.
func (m *deviceMaps) share(s *resourceapi.ResourceSlice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity == nil || m.size() > maxSharedMaps {
		m.capacity = map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		m.counters = map[string]map[string]resourceapi.Counter{}
		m.consumes = map[string][]resourceapi.DeviceCounterConsumption{}
		m.attrs = map[uint64][]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		m.nAttrs = 0
		m.strs = map[string]*string{}
		m.ints = map[int64]*int64{}
		m.bools = [2]*bool{}
	}
	for i := range s.Spec.SharedCounters {
		cs := &s.Spec.SharedCounters[i]
		cs.Name = m.str(cs.Name)
		if len(cs.Counters) > 0 {
			cs.Counters = shared(m.counters, cs.Counters)
		}
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.Name = m.str(d.Name)
		if len(d.Attributes) > 0 {
			d.Attributes = m.attributes(d.Attributes)
		}
		if len(d.Capacity) > 0 {
			d.Capacity = shared(m.capacity, d.Capacity)
		}
		for j := range d.ConsumesCounters {
			cs := &d.ConsumesCounters[j]
			cs.CounterSet = m.str(cs.CounterSet)
			if len(cs.Counters) > 0 {
				cs.Counters = shared(m.counters, cs.Counters)
			}
		}
		if len(d.ConsumesCounters) > 0 {
			d.ConsumesCounters = m.consumption(d.ConsumesCounters)
		}
	}
}

// consumption returns the list seen before with the same counter sets and
// the same (shared) counter maps as l, or l (remembered). The maps are
// told apart by identity: the list remembered holds them, so no map's
// address is reused while it is remembered.
func (m *deviceMaps) consumption(l []resourceapi.DeviceCounterConsumption) []resourceapi.DeviceCounterConsumption {
	var b strings.Builder
	for _, cs := range l {
		b.WriteString(cs.CounterSet)
		b.WriteByte(0)
		b.WriteString(strconv.FormatUint(uint64(reflect.ValueOf(cs.Counters).Pointer()), 16))
		b.WriteByte(0)
	}
	if s, ok := m.consumes[b.String()]; ok {
		return s
	}
	m.consumes[b.String()] = l
	return l
}

// shared returns the map seen before with v's contents, or v (remembered).
// The key is v's JSON: keys sorted, quantities in their canonical form.
func shared[K ~string, V any](seen map[string]map[K]V, v map[K]V) map[K]V {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	if s, ok := seen[string(b)]; ok {
		return s
	}
	seen[string(b)] = v
	return v
}

// attributes returns the attribute map seen before that is equal to a, or
// a copy of a whose names and values are the canonical ones (remembered).
func (m *deviceMaps) attributes(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	h := m.attrHash(a)
	for _, s := range m.attrs[h] {
		if equalAttributes(s, a) {
			return s
		}
	}
	c := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(a))
	for k, v := range a {
		if v.IntValue != nil {
			v.IntValue = m.int(v.IntValue)
		}
		if v.BoolValue != nil {
			v.BoolValue = m.bool(v.BoolValue)
		}
		if v.StringValue != nil {
			v.StringValue = m.strPtr(v.StringValue)
		}
		if v.VersionValue != nil {
			v.VersionValue = m.strPtr(v.VersionValue)
		}
		c[resourceapi.QualifiedName(m.str(string(k)))] = v
	}
	m.attrs[h] = append(m.attrs[h], c)
	m.nAttrs++
	return c
}

// equalAttributes is reflect.DeepEqual(a, b) for attribute maps (which
// took a third of the transform's time): pointers equal or pointing to
// equal values, lists both nil or of equal elements.
func equalAttributes(a, b map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !equalPtr(x.IntValue, y.IntValue) || !equalPtr(x.BoolValue, y.BoolValue) ||
			!equalPtr(x.StringValue, y.StringValue) || !equalPtr(x.VersionValue, y.VersionValue) ||
			!equalList(x.IntValues, y.IntValues) || !equalList(x.BoolValues, y.BoolValues) ||
			!equalList(x.StringValues, y.StringValues) || !equalList(x.VersionValues, y.VersionValues) {
			return false
		}
	}
	return true
}

func equalPtr[T comparable](x, y *T) bool {
	if x == nil || y == nil {
		return x == y
	}
	return *x == *y
}

func equalList[T comparable](x, y []T) bool {
	return (x == nil) == (y == nil) && slices.Equal(x, y)
}

// attrHash hashes a's names and values: maps that equalAttributes finds
// equal hash the same.
func (m *deviceMaps) attrHash(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) uint64 {
	m.keys = m.keys[:0]
	for k := range a {
		m.keys = append(m.keys, string(k))
	}
	slices.Sort(m.keys)
	var h maphash.Hash
	h.SetSeed(m.seed)
	str := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	// present: which of the fields are set, so that nil and empty hash
	// apart as DeepEqual tells them apart.
	present := func(b ...bool) {
		var x byte
		for i, y := range b {
			if y {
				x |= 1 << i
			}
		}
		h.WriteByte(x)
	}
	for _, k := range m.keys {
		v := a[resourceapi.QualifiedName(k)]
		str(k)
		present(v.IntValue != nil, v.BoolValue != nil, v.StringValue != nil, v.VersionValue != nil,
			v.IntValues != nil, v.BoolValues != nil, v.StringValues != nil, v.VersionValues != nil)
		if v.IntValue != nil {
			maphash.WriteComparable(&h, *v.IntValue)
		}
		if v.BoolValue != nil {
			maphash.WriteComparable(&h, *v.BoolValue)
		}
		if v.StringValue != nil {
			str(*v.StringValue)
		}
		if v.VersionValue != nil {
			str(*v.VersionValue)
		}
		for _, x := range v.IntValues {
			maphash.WriteComparable(&h, x)
		}
		for _, x := range v.BoolValues {
			maphash.WriteComparable(&h, x)
		}
		for _, x := range v.StringValues {
			str(x)
		}
		for _, x := range v.VersionValues {
			str(x)
		}
	}
	return h.Sum64()
}

// strPtr returns the canonical pointer to a string equal to *p.
func (m *deviceMaps) strPtr(p *string) *string {
	if c, ok := m.strs[*p]; ok {
		return c
	}
	m.strs[*p] = p
	return p
}

// str returns the canonical string equal to s.
func (m *deviceMaps) str(s string) string {
	if s == "" {
		return s
	}
	return *m.strPtr(&s)
}

func (m *deviceMaps) int(p *int64) *int64 {
	if c, ok := m.ints[*p]; ok {
		return c
	}
	m.ints[*p] = p
	return p
}

func (m *deviceMaps) bool(p *bool) *bool {
	i := 0
	if *p {
		i = 1
	}
	if m.bools[i] == nil {
		m.bools[i] = p
	}
	return m.bools[i]
}
