package k8s

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
)

// keptList is one informer's objects, sorted by name, kept between
// snapshots: at 1,000 nodes, listing and sorting 9,000 ResourceSlices and
// hashing them for the inventory fingerprint on every tick of the batching
// window was a fifth of the controller's CPU. gen counts the informer's
// events; the list is the one sorted at gen at.
type keptList struct {
	gen   atomic.Uint64
	mu    sync.Mutex
	at    uint64
	valid bool
	list  any
}

// changed records an event: the informer's store has changed (its
// handlers run after the store is updated), so the kept list is stale.
func (k *keptList) changed() { k.gen.Add(1) }

// keptSorted is the kept list of k, listed and sorted again if an event
// came since; and the generation it belongs to. The list is shared
// between snapshots: read-only, and clipped so that an append copies.
func keptSorted[T any](k *keptList, list func(labels.Selector) ([]T, error), name func(T) string) ([]T, uint64, error) {
	// gen is read before listing: an event during the listing makes
	// the next snapshot list again.
	g := k.gen.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.valid && k.at == g {
		return k.list.([]T), g, nil
	}
	l, err := list(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(l, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	l = slices.Clip(l)
	k.list, k.at, k.valid = l, g, true
	return l, g, nil
}

// inventoryDerived is what a snapshot's kept kinds determine, computed
// once for their generations: the inventory fingerprint (fairness.go) and
// the devices that consume no shared counters (clearlyFits).
type inventoryDerived struct {
	gens        [5]uint64
	fingerprint uint64
	counterFree []string // driver/pool/device
}

// derivedFor is the derived data of the kept kinds at gens, computed from s
// when they changed.
func (c *Cache) derivedFor(gens [5]uint64, s *Snapshot) *inventoryDerived {
	c.derivedMu.Lock()
	defer c.derivedMu.Unlock()
	if d := c.derived; d != nil && d.gens == gens {
		return d
	}
	d := &inventoryDerived{gens: gens, fingerprint: computeInventoryFingerprint(s), counterFree: counterFreeDevices(s)}
	c.derived = d
	return d
}

// counterFreeDevices are the devices of s's slices that consume no shared
// counters, as driver/pool/device.
func counterFreeDevices(s *Snapshot) []string {
	var out []string
	for _, sl := range s.Slices {
		for _, d := range sl.Spec.Devices {
			if len(d.ConsumesCounters) == 0 {
				out = append(out, sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name)
			}
		}
	}
	return out
}
