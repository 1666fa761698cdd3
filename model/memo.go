package model

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Memo keeps what evaluating CEL selectors learnt of each device
// from one Build to the next (Options.Memo), so that a controller pass over
// a large cluster evaluates selectors only on the devices that are new to
// it: building the selectors' view of a device and its projection key
// (celproject.go) for every device was half of a pass's build at 200 nodes.
//
// A device is known by the address of its resourceapi.Device inside its
// ResourceSlice: the slices come from an informer cache, whose objects are
// never modified (an update is a new object), so the address names one
// content for as long as the memo holds it, and a new or updated slice is
// simply not known yet. A selector's answer is a function of the
// expression, the driver (the slice's, fixed for the object) and the
// device. Builds remain identical to builds without a memo: the memo keeps
// each device's projection key and, where the device was evaluated itself,
// its answer and actual CEL cost, and Build replays the evaluation order,
// sharing and cost accounting of a build from scratch (selectors.go,
// matchesMemo). Evaluation errors are not kept (they name the device and
// are evaluated again).
//
// Only the devices a Build looked at are kept for the next one: a deleted
// or updated slice's devices are dropped after one build. Builds using one
// memo run one at a time.
type Memo struct {
	mu        sync.Mutex
	cur, prev map[*resourceapi.Device]*memoDevice
	// pools, by their first slice: each pool's counters scaled to exact
	// integers (buildPools), a function of its slices and of counterUses.
	pools, prevPools map[*resourceapi.ResourceSlice]*poolScale
	keys             map[string]string // interned projection keys
	// pods: each pod's requests (PodRequests), by the object: every
	// build counts every bound pod's requests on its node.
	pods, prevPods map[*corev1.Pod]map[corev1.ResourceName]int64
	// usable is the last usablePools answer with the slices and nodes it
	// was for: a cluster whose slices and nodes are the same objects, in
	// the same order, has the same usable pools (every pool against every
	// node, the quadratic part of a build on a large cluster).
	usable *memoUsable
	gen    uint32 // builds begun
	// Evaluations and Reused count, over the memo's life, the selector
	// evaluations done and the ones answered from the memo (for tests and
	// the controller's logs).
	Evaluations, Reused int
}

// memoDevice is what the memo knows of one device: per expression, its
// projection key and, when evaluated, its answer and cost.
type memoDevice struct {
	gen   uint32 // the build that last looked at it
	exprs []memoEntry
	attrs []memoAttr // value sets of attributes constraints asked for
}

// memoAttr is a device's value set of one attribute (attributeValues).
type memoAttr struct {
	name string
	vals *[]string
}

type memoEntry struct {
	gen       uint32 // the build that last used it
	expr      string
	keyed     bool   // key and share are set
	share     bool   // the expression is projectable and the device shareable
	key       string // projection key, when share
	evaluated bool   // ok and cost are set (evaluated without error)
	ok        bool
	cost      uint64
}

// poolScale is a pool's counters as buildPools scales them: whether they
// fit drasat's integers, each counter set's capacity and unit (sets by
// name, counters sorted), and every device's consumptions in the order
// buildPools meets them.
type poolScale struct {
	slices   []*resourceapi.ResourceSlice
	uses     int64
	fitErr   error
	sets     []string   // the counter sets' names, sorted
	counters [][]string // per set, its counters' names, sorted
	capacity [][]int64
	unit     [][]string
	consumes [][]int64
}

type memoUsable struct {
	slices []*resourceapi.ResourceSlice
	nodes  []*corev1.Node
	copies []poolCopy
	issues []PoolIssue
}

// usablePools is usablePools(slices, nodes), from the memo when both are
// the objects of the last call. The answer is the caller's to extend.
func (m *Memo) usablePools(in []*resourceapi.ResourceSlice, nodes []*corev1.Node) ([]poolCopy, []PoolIssue) {
	if m == nil {
		return usablePools(in, nodes)
	}
	if u := m.usable; u == nil || !slicesEqual(u.slices, in) || !slicesEqual(u.nodes, nodes) {
		copies, issues := usablePools(in, nodes)
		// The caller's lists may change after the build: keep copies.
		m.usable = &memoUsable{slices: slices.Clone(in), nodes: slices.Clone(nodes), copies: copies, issues: issues}
	}
	return slices.Clone(m.usable.copies), slices.Clone(m.usable.issues)
}

// pool returns the scaling of the pool made of slices for uses, or nil.
func (m *Memo) pool(slices []*resourceapi.ResourceSlice, uses int64) *poolScale {
	if m == nil || len(slices) == 0 {
		return nil
	}
	ps := m.pools[slices[0]]
	if ps == nil {
		ps = m.prevPools[slices[0]]
	}
	if ps == nil || ps.uses != uses || !slicesEqual(ps.slices, slices) {
		return nil
	}
	m.pools[slices[0]] = ps
	return ps
}

// podRequests is PodRequests(pod), from the memo when this or the last
// build asked it of the same object (objects are never changed in
// place). The answer is read-only.
func (m *Memo) podRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	if m == nil {
		return PodRequests(pod)
	}
	r, ok := m.pods[pod]
	if !ok {
		if r, ok = m.prevPods[pod]; !ok {
			r = PodRequests(pod)
		}
		m.pods[pod] = r
	}
	return r
}

// PodRequests is PodRequests(pod) through the memo (nil: none), for
// those who count pods' requests beside a build, as the builds do.
func (m *Memo) PodRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	if m == nil {
		return PodRequests(pod)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.podRequests(pod)
}

// putPool keeps ps for the next builds.
func (m *Memo) putPool(ps *poolScale) {
	if m != nil && len(ps.slices) > 0 {
		m.pools[ps.slices[0]] = ps
	}
}

func slicesEqual[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// maxMemoKeys bounds the interned keys; past it the interning starts over
// (the entries keep their strings, only sharing new ones is lost).
const maxMemoKeys = 1 << 16

// NewMemo returns an empty memo.
func NewMemo() *Memo {
	return &Memo{cur: map[*resourceapi.Device]*memoDevice{}, prev: map[*resourceapi.Device]*memoDevice{},
		pools: map[*resourceapi.ResourceSlice]*poolScale{}, prevPools: map[*resourceapi.ResourceSlice]*poolScale{}, keys: map[string]string{},
		pods: map[*corev1.Pod]map[corev1.ResourceName]int64{}, prevPods: map[*corev1.Pod]map[corev1.ResourceName]int64{}}
}

// memoKeepBuilds is how many builds an expression's entry on a device
// survives unused: a controller's pass makes a few builds (its batch, the
// frag look-ahead's shapes, a reservation), each with its own selectors,
// and selectors of claims long allocated must not pile up on every device.
const memoKeepBuilds = 8

// begin locks the memo for one build.
func (m *Memo) begin() {
	m.mu.Lock()
	m.gen++
}

// end keeps the devices this build used for the next one and unlocks. A
// build that stopped early (an error, its deadline) looked at only some
// devices: it keeps the others too.
func (m *Memo) end(complete bool) {
	if !complete {
		for d, md := range m.cur {
			m.prev[d] = md
		}
		for s, ps := range m.pools {
			m.prevPools[s] = ps
		}
		for p, r := range m.pods {
			m.prevPods[p] = r
		}
	} else {
		m.prev, m.prevPools = m.cur, m.pools
		if len(m.pods) > 0 {
			// A build that counted no pods' requests (no pending pod
			// with claims) keeps the last one's.
			m.prevPods = m.pods
		}
	}
	m.cur = make(map[*resourceapi.Device]*memoDevice, len(m.prev))
	m.pools = make(map[*resourceapi.ResourceSlice]*poolScale, len(m.prevPools))
	m.pods = make(map[*corev1.Pod]map[corev1.ResourceName]int64, len(m.prevPods))
	m.mu.Unlock()
}

// device returns the memo's record of dev, kept for the next build,
// created empty if needed. A build asks once per device (celEnv keeps the
// answer by device index): a lookup per selector and device was most of a
// memo-warm build's matching at 1,000 nodes.
func (m *Memo) device(dev *resourceapi.Device) *memoDevice {
	md := m.cur[dev]
	if md == nil {
		if md = m.prev[dev]; md == nil {
			md = &memoDevice{}
		}
		m.cur[dev] = md
	}
	if md.gen != m.gen {
		md.gen = m.gen
		md.exprs = slices.DeleteFunc(md.exprs, func(e memoEntry) bool { return m.gen-e.gen >= memoKeepBuilds })
	}
	return md
}

// entry returns md's record of expr in build gen, created empty if needed.
func (md *memoDevice) entry(gen uint32, expr string) *memoEntry {
	for i := range md.exprs {
		if e := &md.exprs[i]; e.expr == expr {
			e.gen = gen
			return e
		}
	}
	md.exprs = append(md.exprs, memoEntry{gen: gen, expr: expr})
	return &md.exprs[len(md.exprs)-1]
}

// intern returns a string equal to key, shared with earlier equal ones.
func (m *Memo) intern(key []byte) string {
	if s, ok := m.keys[string(key)]; ok {
		return s
	}
	if len(m.keys) >= maxMemoKeys {
		m.keys = map[string]string{}
	}
	s := string(key)
	m.keys[s] = s
	return s
}
