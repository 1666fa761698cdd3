package k8s

import (
	"encoding/json"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
)

// deviceMaps shares, among the cached ResourceSlices, the maps that many
// devices carry with the same contents: a device's capacity (every MIG
// device of one profile has the same) and the counters a device consumes
// (the same for one placement on every GPU of every node). Decoded, each
// device holds its own copy; measured on the MIG slices of 200 nodes, the
// maps were most of the cache (docs/adapter.md, Memory). Shared maps are
// read-only like everything in an informer's cache: drasat never modifies
// a cached object. A device's attributes carry its own UUID and are kept
// as decoded.
type deviceMaps struct {
	mu       sync.Mutex
	capacity map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	counters map[string]map[string]resourceapi.Counter
}

// maxSharedMaps bounds what deviceMaps remembers: past it, it starts over
// (sharing less until the maps are seen again, never wrongly), so maps of
// slices long deleted are not kept forever.
const maxSharedMaps = 1 << 14

func newDeviceMaps() *deviceMaps { return &deviceMaps{} }

// share replaces the capacity and counter maps of s's devices with equal
// ones already seen.
func (m *deviceMaps) share(s *resourceapi.ResourceSlice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity == nil || len(m.capacity)+len(m.counters) > maxSharedMaps {
		m.capacity = map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		m.counters = map[string]map[string]resourceapi.Counter{}
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if len(d.Capacity) > 0 {
			d.Capacity = shared(m.capacity, d.Capacity)
		}
		for j := range d.ConsumesCounters {
			if cs := &d.ConsumesCounters[j]; len(cs.Counters) > 0 {
				cs.Counters = shared(m.counters, cs.Counters)
			}
		}
	}
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
