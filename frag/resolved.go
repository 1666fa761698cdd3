package frag

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"

	"github.com/drasat/drasat/model"
)

// resolved is a built claim spec resolved against a problem's devices:
// what bind derives from the spec's candidates. It depends on the spec as
// built and on what layoutOf records of the problem, nothing else, so it
// is kept between the problems of one cluster: bench's windows and the
// controller's passes build a new problem every time, of the same
// devices, and resolving every shape against every GPU was a fifth of a
// whole-cluster curve's CPU (docs/bench.md). Its maps are read-only once
// made: the shapes of every measure bound with it share them.
type resolved struct {
	count int // devices the shape asks for; 0: a task without devices
	// bySet lists, per unit (counter set or shared device), the shape's
	// candidate devices that consume from it.
	bySet map[int][]int
	// need is what one device of the shape takes of a shared device's
	// capacities, as shares of their values. hosts reads sharedOK (bit i:
	// shared unit i is a candidate) and sharedNeed (the need when it is
	// the same on every candidate, as on GPUs of one kind) instead of the
	// maps: they are the measure's innermost loop.
	need       map[int][]float64
	sharedOK   []uint64
	sharedNeed []float64
	needVaries bool
	any        bool         // some candidate exists
	onNode     map[int]bool // nodes on which the shape has candidates
	units      []int        // the units of bySet with candidates, sorted (scarce.go)
	share      float64      // the first non-zero deviceShare of its candidates: the shape's demand per device
}

// resolvedCache keeps the specs the last bind resolved, for its layout
// (w.mu guards it). Only the last bind's: the controller's passes build
// their specs anew (BindBuilt), and an entry kept past its pass would keep
// that pass's built claims, candidate lists and all, alive.
type resolvedCache struct {
	layout layout
	specs  map[*model.Claim]*resolved
	// built: the resolutions of specs built with the problem (BindBuilt),
	// by what resolving them reads of the spec (builtDigest): the next
	// pass builds the same specs as new claims, and on the same layout
	// with the same candidates they resolve alike.
	built map[layout]*resolved
}

// layout is the SHA-256 of what layoutOf records: a digest rather than
// the record, which at 200,000 devices is megabytes.
type layout [sha256.Size]byte

// layoutOf records everything of p that resolving a spec reads: the
// devices (ID, counter consumption, capacities, reach, multi-allocation)
// and the counter sets (names and capacities). Two problems with the same
// layout resolve every spec alike.
func layoutOf(p *model.Problem) layout {
	h := sha256.New()
	var buf []byte
	// flush hashes what buf holds every few kilobytes.
	flush := func() {
		if len(buf) > 1<<12 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	u := func(v int) { buf = binary.AppendUvarint(buf, uint64(v)) }
	s := func(x string) { u(len(x)); buf = append(buf, x...) }
	b := func(x bool) {
		if x {
			buf = append(buf, 1)
		} else {
			buf = append(buf, 0)
		}
	}
	u(len(p.CounterSets))
	for _, cs := range p.CounterSets {
		u(len(cs.Counters))
		for j, name := range cs.Counters {
			s(name)
			buf = binary.AppendVarint(buf, cs.Capacity[j])
		}
		flush()
	}
	u(len(p.Devices))
	for _, d := range p.Devices {
		s(d.ID.Driver)
		s(d.ID.Pool)
		s(d.ID.Device)
		b(d.MultiAlloc)
		b(d.All)
		u(len(d.Capacity))
		u(len(d.Consumes))
		for _, c := range d.Consumes {
			u(c.Set)
			u(len(c.Amounts))
			for _, a := range c.Amounts {
				buf = binary.AppendVarint(buf, a)
			}
		}
		u(len(d.Reach))
		for _, n := range d.Reach {
			u(n)
		}
		flush()
	}
	h.Write(buf)
	var l layout
	h.Sum(l[:0])
	return l
}

// resolvedFor returns the kept resolution of bs against layout l, or nil;
// digest is bs's builtDigest, for specs built with the problem.
func (w *Workload) resolvedFor(l layout, bs builtSpec, digest *layout) *resolved {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resolved == nil || w.resolved.layout != l {
		return nil
	}
	if r := w.resolved.specs[bs.c]; r != nil || digest == nil {
		return r
	}
	return w.resolved.built[*digest]
}

// keepResolved keeps the specs a bind resolved (and only those) for the
// next one.
func (w *Workload) keepResolved(l layout, specs map[*model.Claim]*resolved, built map[layout]*resolved) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resolved = &resolvedCache{layout: l, specs: specs, built: built}
}

// builtDigest is the SHA-256 of what resolve reads of a spec built with
// m's problem besides its layout: the count, the candidates, and what
// each takes of a shared device's capacities.
func (m *Measure) builtDigest(bs builtSpec) layout {
	a := bs.c.Requests[0].Alternatives[0]
	h := sha256.New()
	buf := binary.AppendUvarint(nil, uint64(a.Count))
	buf = binary.AppendUvarint(buf, uint64(len(a.Candidates)))
	for _, d := range a.Candidates {
		buf = binary.AppendUvarint(buf, uint64(d))
		if _, ok := m.unitOf[d]; ok {
			for _, x := range a.CapacityShares(d) {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
			}
		}
		if len(buf) > 1<<12 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var l layout
	h.Sum(l[:0])
	return l
}

// resolve derives r from bs's candidates on m's problem. devOf maps a
// candidate (an index into bs.devices) to p's device.
func (m *Measure) resolve(bs builtSpec, devOf func([]*model.Device, int) (int, bool)) *resolved {
	p := m.p
	a := bs.c.Requests[0].Alternatives[0]
	r := &resolved{count: max(a.Count, 1), bySet: map[int][]int{}, need: map[int][]float64{}, onNode: map[int]bool{}}
	for _, qd := range a.Candidates {
		d, ok := devOf(bs.devices, qd)
		if !ok {
			continue
		}
		r.any = true
		dev := p.Devices[d]
		for _, cons := range dev.Consumes {
			r.bySet[cons.Set] = append(r.bySet[cons.Set], d)
		}
		if u, ok := m.unitOf[d]; ok && len(bs.devices[qd].Capacity) == len(dev.Capacity) {
			r.bySet[u] = append(r.bySet[u], d)
			need := a.CapacityShares(qd)
			r.need[d] = need
			if r.sharedOK == nil {
				r.sharedOK = make([]uint64, (len(m.shared)+63)/64)
				r.sharedNeed = need
			} else if !slices.Equal(need, r.sharedNeed) {
				r.needVaries = true
			}
			i := u - m.nSets
			r.sharedOK[i/64] |= 1 << (i % 64)
		}
		if dev.All {
			r.onNode[-1] = true
		}
		for _, n := range dev.Reach {
			r.onNode[n] = true
		}
		if r.share == 0 {
			r.share = m.deviceShare(d, r.need[d])
		}
	}
	r.units = unitsOf(r.bySet)
	return r
}
