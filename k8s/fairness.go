package k8s

import (
	"errors"
	"hash/fnv"
	"io"
	"slices"
	"sort"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// fairness decides which pending claims a pass solves, so that no claim
// starves and no CPU is spent re-solving claims that cannot fit:
//
//   - A claim the engine found unplaceable even alone (against every
//     allocation then in the cluster) is parked: it is left out of later
//     passes until something that could make it fit changes. Since more
//     allocations only take devices and counters away, that is: the
//     ResourceSlices, DeviceClasses, DeviceTaintRules or node labels change
//     (the inventory fingerprint), or an allocation that existed when it
//     failed is released or changed (the release epoch). A claim's spec is
//     immutable, so a changed claim is a new UID, which is never parked.
//   - Batches are taken fairly: claims a pass deferred at its target
//     first (deferred), then claims never tried (oldest first), then the
//     least recently tried. So a new claim is tried in the next
//     pass unless more than MaxBatch new claims arrived at once, and every
//     claim within a bounded number of passes.
type fairness struct {
	pass int // passes that solved something, for "least recently tried"
	// passes counts every pass; firstSeen: claim UID -> the pass that
	// first saw it pending (for drasat_passes_to_first_try).
	passes    int
	firstSeen map[string]int
	// tried: claim UID -> pass it was last solved in.
	tried map[string]int
	// parked: claim UID -> state it was unplaceable against.
	parked map[string]parkState

	// allocs: allocated claim UID -> hash of its allocation at the last
	// snapshot; a missing or different entry later is a release.
	allocs       map[string]uint64
	releaseEpoch int
	inventory    uint64
}

type parkState struct {
	inventory    uint64
	releaseEpoch int
}

func newFairness() *fairness {
	return &fairness{tried: map[string]int{}, parked: map[string]parkState{}, allocs: map[string]uint64{}, firstSeen: map[string]int{}}
}

// observe updates the inventory fingerprint and the release epoch from a
// snapshot; call it once per pass, before select.
func (f *fairness) observe(s *Snapshot) {
	f.passes++
	f.inventory = inventoryFingerprint(s)
	now := allocations(s)
	if f.released(now) {
		f.releaseEpoch++
	}
	f.allocs = now
}

// allocations maps each allocated claim's UID to its allocation's hash
// (and each pod holding node resources to its node, podsHeld).
func allocations(s *Snapshot) map[string]uint64 {
	now := make(map[string]uint64, len(s.Claims))
	for _, c := range s.Claims {
		if c.Status.Allocation != nil {
			now[string(c.UID)] = allocationHash(c.Status.Allocation)
		}
	}
	podsHeld(s, now)
	return now
}

// released reports whether an allocation seen at the last observe is gone
// or changed in now.
func (f *fairness) released(now map[string]uint64) bool {
	for uid, h := range f.allocs {
		if h2, ok := now[uid]; !ok || h2 != h {
			return true
		}
	}
	return false
}

// epochOf is the release epoch observe would give s, without observing it.
func (f *fairness) epochOf(s *Snapshot) int {
	if f.released(allocations(s)) {
		return f.releaseEpoch + 1
	}
	return f.releaseEpoch
}

// isParked reports whether a claim is left out because nothing it depends on
// changed since it was found unplaceable.
func (f *fairness) isParked(c *resourceapi.ResourceClaim) bool {
	p, ok := f.parked[string(c.UID)]
	return ok && p.inventory == f.inventory && p.releaseEpoch == f.releaseEpoch
}

// selectBatch returns the claims to solve (at most max, 0 = all), never
// tried first, then least recently tried, a workload's claims together
// (owners: claim UID -> workload, see claimOwners); and how many pending claims were
// left out because the batch was full (parked claims are not counted).
// pending is in creation order. It forgets claims no longer pending.
func (f *fairness) selectBatch(pending []*resourceapi.ResourceClaim, owners map[string]string, max int) (batch []*resourceapi.ResourceClaim, leftOut int) {
	live := make(map[string]bool, len(pending))
	for _, c := range pending {
		live[string(c.UID)] = true
		if _, ok := f.firstSeen[string(c.UID)]; !ok {
			f.firstSeen[string(c.UID)] = f.passes
		}
		if f.isParked(c) {
			continue
		}
		delete(f.parked, string(c.UID))
		batch = append(batch, c)
	}
	for uid := range f.tried {
		if !live[uid] {
			delete(f.tried, uid)
		}
	}
	for uid := range f.parked {
		if !live[uid] {
			delete(f.parked, uid)
		}
	}
	for uid := range f.firstSeen {
		if !live[uid] {
			delete(f.firstSeen, uid)
		}
	}
	// Stable: equal "last tried" keeps creation order. Never tried = -1,
	// deferred (before them) = deferredRank.
	last := func(c *resourceapi.ResourceClaim) int {
		if p, ok := f.tried[string(c.UID)]; ok {
			return p
		}
		return -1
	}
	// A workload's claims (pods of one owner) move together: a group
	// ranks by its member tried longest ago.
	rank := map[string]int{}
	for _, c := range batch {
		g := groupOf(owners, c)
		if r, ok := rank[g]; !ok || last(c) < r {
			rank[g] = last(c)
		}
	}
	first := map[string]int{}
	for i, c := range batch {
		if _, ok := first[groupOf(owners, c)]; !ok {
			first[groupOf(owners, c)] = i
		}
	}
	key := func(c *resourceapi.ResourceClaim) (int, int) {
		g := groupOf(owners, c)
		return rank[g], first[g]
	}
	sort.SliceStable(batch, func(i, j int) bool {
		ri, fi := key(batch[i])
		rj, fj := key(batch[j])
		return ri < rj || (ri == rj && fi < fj)
	})
	if max > 0 && len(batch) > max {
		// Whole groups only, unless the first group alone exceeds max.
		cut := max
		if g := groupOf(owners, batch[max-1]); g == groupOf(owners, batch[max]) {
			for cut > 0 && groupOf(owners, batch[cut-1]) == g {
				cut--
			}
			if cut == 0 {
				cut = max
			}
		}
		leftOut = len(batch) - cut
		batch = batch[:cut]
	}
	return batch, leftOut
}

// groupOf is the workload a claim belongs to: its pod's controlling owner
// (owners, from claimOwners), else the claim itself.
func groupOf(owners map[string]string, c *resourceapi.ResourceClaim) string {
	if g, ok := owners[string(c.UID)]; ok {
		return g
	}
	return "claim/" + string(c.UID)
}

// claimOwners maps the claims of gated pods to their pod's controlling
// owner (a ReplicaSet, Job, …) or, without one, to the pod.
func claimOwners(s *Snapshot) map[string]string {
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, c := range s.Claims {
		byKey[claimKey(c)] = c
	}
	out := map[string]string{}
	for _, p := range s.Pods {
		if !hasGate(p) {
			continue
		}
		g := "pod/" + string(p.UID)
		if ref := metav1.GetControllerOf(p); ref != nil {
			g = "owner/" + string(ref.UID)
		}
		names, _ := podClaimNames(p)
		for _, n := range names {
			if c := byKey[p.Namespace+"/"+n]; c != nil {
				out[string(c.UID)] = g
			}
		}
	}
	return out
}

// deferred puts claims a pass solved but did not write (it reached its
// target, writer.go) first in line for the next pass: they are not
// decided, and behind the claims of a stream they would wait for the
// stream to end (bind p99 572 s at 1,000 nodes, 5,000 pods). They keep
// their first try (drasat_passes_to_first_try counts it once).
func (f *fairness) deferred(cs []*resourceapi.ResourceClaim) {
	for _, c := range cs {
		f.tried[string(c.UID)] = deferredRank
	}
}

// deferredRank is a deferred claim's "last tried": before every pass,
// and before -1, never tried.
const deferredRank = -2

// solved records that a batch was solved and which of its claims were
// unplaceable even alone. It returns, for each claim tried for the first
// time, how many passes after the one that first saw it pending.
func (f *fairness) solved(batch []*resourceapi.ResourceClaim, unplaceable []*resourceapi.ResourceClaim) (waits []int) {
	f.pass++
	for _, c := range batch {
		if _, ok := f.tried[string(c.UID)]; !ok {
			if s, ok := f.firstSeen[string(c.UID)]; ok {
				waits = append(waits, f.passes-s)
			}
		}
		f.tried[string(c.UID)] = f.pass
	}
	for _, c := range unplaceable {
		f.parked[string(c.UID)] = parkState{inventory: f.inventory, releaseEpoch: f.releaseEpoch}
	}
	return waits
}

// inventoryFingerprint hashes what decides where claims can go, apart from
// allocations: slices, classes, taint rules (by resourceVersion and
// generation) and node labels (not node status, which changes all the
// time), and what decides where their pods can run (podRulesParts).
func inventoryFingerprint(s *Snapshot) uint64 {
	if s.derived != nil {
		return s.derived.fingerprint
	}
	return computeInventoryFingerprint(s)
}

func computeInventoryFingerprint(s *Snapshot) uint64 {
	h := fnv.New64a()
	w := func(parts ...string) {
		for _, p := range parts {
			io.WriteString(h, p)
			h.Write([]byte{0})
		}
	}
	for _, x := range s.Slices {
		w("s", x.Name, string(x.UID), x.ResourceVersion, strconv.FormatInt(x.Generation, 10))
	}
	for _, x := range s.Classes {
		w("c", x.Name, string(x.UID), x.ResourceVersion, strconv.FormatInt(x.Generation, 10))
	}
	for _, x := range s.TaintRules {
		w("t", x.Name, string(x.UID), x.ResourceVersion, strconv.FormatInt(x.Generation, 10))
	}
	for _, n := range s.Nodes {
		w("n", n.Name, string(n.UID))
		keys := make([]string, 0, len(n.Labels))
		for k := range n.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w(k, n.Labels[k])
		}
	}
	podRulesParts(s, w)
	return h.Sum64()
}

// allocationHash identifies an allocation by its devices.
func allocationHash(a *resourceapi.AllocationResult) uint64 {
	h := fnv.New64a()
	for _, r := range a.Devices.Results {
		io.WriteString(h, r.Request+"\x00"+r.Driver+"\x00"+r.Pool+"\x00"+r.Device+"\x00")
	}
	return h.Sum64()
}

// cannotFit lists the batch's claims that fit nowhere even alone, or that
// could not be encoded (a missing class, a bad selector): solving them
// again is pointless until the inventory or the allocations change. Not a
// claim whose selectors the pass ran out of budget for (its time, or the
// CEL cost the batch shares): that says nothing about the claim, and the
// next pass, with the memo's answers so far, gets further.
func cannotFit(p *model.Problem, out *alloc.Result) []*resourceapi.ResourceClaim {
	var cs []*resourceapi.ResourceClaim
	for _, i := range out.Unplaceable {
		cs = append(cs, p.Claims[i].Obj)
	}
	for i := range out.Rejected {
		if c := p.Claims[i]; c.Err != nil && !outOfRunBudget(c.Err) {
			cs = append(cs, c.Obj)
		}
	}
	return cs
}

// outOfRunBudget tells whether err is a selector the run had no budget
// left for (model.BudgetError.OfTheRun).
func outOfRunBudget(err error) bool {
	be := (*model.BudgetError)(nil)
	return errors.As(err, &be) && be.OfTheRun
}
