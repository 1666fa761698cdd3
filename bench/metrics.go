package bench

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
)

// Usage is what a set of allocations occupies, read directly from the
// objects (not from drasat's model), so every policy is measured alike.
type Usage struct {
	Devices   int // devices in the new allocations
	Units     int // physical units (GPUs, TPU hosts)
	UnitsUsed int // units with any counter consumed (existing + new)
	UnitsFree int // units with nothing consumed
	Util      float64
}

type counterKey struct{ driver, pool, set, counter string }

// world indexes the devices and counter sets of the objects' slices
// (highest generation per pool).
type world struct {
	devs     map[input.DeviceID][]resourceapi.DeviceCounterConsumption
	capacity map[counterKey]float64
	keys     []counterKey
	// setOrder lists counter sets (driver/pool/set) in publication order.
	setOrder []counterKey
	// devAttrs are the devices' attributes (for MIG pictures, the
	// profile).
	devAttrs map[input.DeviceID]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	nodeOf   map[string]string // driver/pool -> node name, when the slice names one
	// product is the productName attribute of the devices consuming a
	// counter set (key without counter), when they carry one.
	product map[counterKey]string
	// shared lists the devices with allowMultipleAllocations, in
	// publication order, and caps their capacity values.
	shared []input.DeviceID
	caps   map[input.DeviceID]map[resourceapi.QualifiedName]float64
}

func newWorld(objs *input.Objects) *world {
	w := &world{devs: map[input.DeviceID][]resourceapi.DeviceCounterConsumption{}, capacity: map[counterKey]float64{},
		devAttrs: map[input.DeviceID]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}, nodeOf: map[string]string{},
		product: map[counterKey]string{}, caps: map[input.DeviceID]map[resourceapi.QualifiedName]float64{}}
	gen := map[string]int64{}
	for _, s := range objs.Slices {
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if g, ok := gen[k]; !ok || s.Spec.Pool.Generation > g {
			gen[k] = s.Spec.Pool.Generation
		}
	}
	for _, s := range objs.Slices {
		if s.Spec.Pool.Generation != gen[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			continue
		}
		if s.Spec.NodeName != nil {
			w.nodeOf[s.Spec.Driver+"/"+s.Spec.Pool.Name] = *s.Spec.NodeName
		}
		for _, cs := range s.Spec.SharedCounters {
			set := counterKey{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, set: cs.Name}
			w.setOrder = append(w.setOrder, set)
			names := make([]string, 0, len(cs.Counters))
			for n := range cs.Counters {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				c := cs.Counters[n]
				k := counterKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name, n}
				w.capacity[k] = c.Value.AsApproximateFloat64()
				w.keys = append(w.keys, k)
			}
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			id := input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}
			w.devs[id] = d.ConsumesCounters
			w.devAttrs[id] = d.Attributes
			if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
				w.shared = append(w.shared, id)
				w.caps[id] = map[resourceapi.QualifiedName]float64{}
				for name, c := range d.Capacity {
					w.caps[id][name] = c.Value.AsApproximateFloat64()
				}
			}
			if a, ok := d.Attributes["productName"]; ok && a.StringValue != nil {
				for _, cc := range d.ConsumesCounters {
					w.product[counterKey{s.Spec.Driver, s.Spec.Pool.Name, cc.CounterSet, ""}] = *a.StringValue
				}
			}
		}
	}
	return w
}

// consumption sums the counters used by the existing allocations of objs
// and by the given new ones.
func (w *world) consumption(objs *input.Objects, added []*resourceapi.ResourceClaim) (map[counterKey]float64, int) {
	used := map[counterKey]float64{}
	add := func(a *resourceapi.AllocationResult) int {
		n := 0
		for _, r := range a.Devices.Results {
			n++
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			for _, cc := range w.devs[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}] {
				for name, c := range cc.Counters {
					used[counterKey{r.Driver, r.Pool, cc.CounterSet, name}] += c.Value.AsApproximateFloat64()
				}
			}
		}
		return n
	}
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			add(c.Status.Allocation)
		}
	}
	devices := 0
	for _, c := range added {
		if c.Status.Allocation != nil {
			devices += add(c.Status.Allocation)
		}
	}
	return used, devices
}

func (w *world) usage(in *Instance, added []*resourceapi.ResourceClaim) Usage {
	if in.Capacity != "" {
		return w.capacityUsage(in, added)
	}
	used, devices := w.consumption(in.Objs, added)
	u := Usage{Devices: devices}
	unitUsed := map[string]bool{}
	var units []string
	var num, den float64
	for _, k := range w.keys {
		unit := k.driver + "/" + k.pool + "/" + in.Unit(k.set, k.counter)
		if _, seen := unitUsed[unit]; !seen {
			units = append(units, unit)
			unitUsed[unit] = false
		}
		if used[k] > 0 {
			unitUsed[unit] = true
		}
		if in.Util(k.counter) {
			num += used[k]
			den += w.capacity[k]
		}
	}
	u.Units = len(units)
	for _, un := range units {
		if unitUsed[un] {
			u.UnitsUsed++
		}
	}
	u.UnitsFree = u.Units - u.UnitsUsed
	if den > 0 {
		u.Util = num / den
	}
	return u
}

// GPUPicture is one GPU's memory slices after a placement, for the
// KEP-4815-style diagrams: per slice the claim holding it ("" free) and
// whether that claim was already running.
type GPUPicture struct {
	GPU string `json:"gpu"`
	// Model is the GPU's productName, given for fleets other than the
	// default A100 one.
	Model  string      `json:"model,omitempty"`
	Slices [8]SliceUse `json:"slices"`
}

// SliceUse is one memory slice's occupant.
type SliceUse struct {
	Claim  string `json:"claim,omitempty"`
	Device string `json:"device,omitempty"`
	// Profile is the device's profile attribute ("2g.10gb", "full" for a
	// whole GPU); device names cannot carry it, they are DNS labels.
	Profile  string `json:"profile,omitempty"`
	Existing bool   `json:"existing,omitempty"`
}

// profile is the string value of a device's profile attribute, "" when it
// has none.
func (w *world) profile(id input.DeviceID) string {
	if a, ok := w.devAttrs[id]["profile"]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// pictures draws the memory slices of every GPU (counter set with
// memory-slice counters), naming each GPU's model when withModel is set.
func (w *world) pictures(objs *input.Objects, added []*resourceapi.ResourceClaim, withModel bool) []GPUPicture {
	idx := map[counterKey]int{}
	var out []GPUPicture
	for _, set := range w.setOrder {
		if _, ok := w.capacity[counterKey{set.driver, set.pool, set.set, "memory-slice-0"}]; !ok {
			continue
		}
		idx[set] = len(out)
		name := set.set
		if n, ok := w.nodeOf[set.driver+"/"+set.pool]; ok {
			name = n + "/" + strings.TrimSuffix(set.set, "-counter-set")
		}
		pic := GPUPicture{GPU: name}
		if withModel {
			pic.Model = w.product[set]
		}
		out = append(out, pic)
	}
	mark := func(c *resourceapi.ResourceClaim, existing bool) {
		for _, r := range c.Status.Allocation.Devices.Results {
			id := input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
			for _, cc := range w.devs[id] {
				i, ok := idx[counterKey{r.Driver, r.Pool, cc.CounterSet, ""}]
				if !ok {
					continue
				}
				for s := 0; s < 8; s++ {
					if _, uses := cc.Counters[fmt.Sprintf("memory-slice-%d", s)]; uses {
						out[i].Slices[s] = SliceUse{Claim: c.Name, Device: r.Device, Profile: w.profile(id), Existing: existing}
					}
				}
			}
		}
	}
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			mark(c, true)
		}
	}
	for _, c := range added {
		if c.Status.Allocation != nil {
			mark(c, false)
		}
	}
	return out
}

// heapSampler records the peak of live heap objects while a run goes on.
type heapSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup
	base uint64
	peak uint64
}

var heapMetric = "/memory/classes/heap/objects:bytes"

func readHeap() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{}), base: readHeap()}
	h.peak = h.base
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				if v := readHeap(); v > h.peak {
					h.peak = v
				}
			}
		}
	}()
	return h
}

// Peak stops sampling and returns the peak heap growth in bytes.
func (h *heapSampler) Peak() uint64 {
	// Stop the sampler before touching peak: it writes peak too.
	close(h.stop)
	h.wg.Wait()
	if v := readHeap(); v > h.peak {
		h.peak = v
	}
	if h.peak < h.base {
		return 0
	}
	return h.peak - h.base
}

// capacityUsage measures shared devices: a unit is one such device, used
// when any share (existing or new) holds part of it; utilisation is the
// share of the instance's capacity (Instance.Capacity) consumed.
func (w *world) capacityUsage(in *Instance, added []*resourceapi.ResourceClaim) Usage {
	name := resourceapi.QualifiedName(in.Capacity)
	used := map[input.DeviceID]float64{}
	held := map[input.DeviceID]bool{}
	u := Usage{}
	add := func(a *resourceapi.AllocationResult, isNew bool) {
		for _, r := range a.Devices.Results {
			if isNew {
				u.Devices++
			}
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
			held[id] = true
			if q, ok := r.ConsumedCapacity[name]; ok {
				used[id] += q.AsApproximateFloat64()
			}
		}
	}
	for _, c := range in.Objs.Claims {
		if c.Status.Allocation != nil {
			add(c.Status.Allocation, false)
		}
	}
	for _, c := range added {
		if c.Status.Allocation != nil {
			add(c.Status.Allocation, true)
		}
	}
	var num, den float64
	for _, id := range w.shared {
		u.Units++
		if held[id] {
			u.UnitsUsed++
		}
		num += used[id]
		den += w.caps[id][name]
	}
	u.UnitsFree = u.Units - u.UnitsUsed
	if den > 0 {
		u.Util = num / den
	}
	return u
}
