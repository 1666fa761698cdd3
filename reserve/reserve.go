// Package reserve keeps a node for a claim that waits because it fits
// nowhere, the reservation of backfilling schedulers (EASY backfilling).
//
// Without it, maximising each batch's admitted claims starves a rare large
// claim for good: a claim of 8 GPUs needs a whole node drained, and while
// small claims keep arriving, every batch puts some of them on every node
// that frees up, so no node ever drains. A reservation makes one node
// drain: no new claim other than the waiting one is placed there until the
// waiting claim is allocated. Departures are not known in advance, so the
// node chosen is the one with the fewest running claims among those where
// the waiting claim fits once they are gone.
//
// The Reserver lives through the batches (bench's replay, the controller):
// a claim seen pending in an earlier batch (remembered for forgetAfter
// batches, as a batch may leave it out) that is still pending has waited;
// the first such claim in batch order (arrival order in both) that fits
// nowhere even alone, although the devices it asks for are free in the
// cluster as a whole (spread over nodes), gets the reservation, which
// holds until that claim is allocated or forgotten, also through batches
// that leave it out. A claim that waits because
// the cluster is full gets none: the next departure serves it, and a node
// kept for it would idle. A claim seen in one batch only (the dropping replay,
// or a claim admitted where it arrived) never causes a reservation.
package reserve

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// fitSteps bounds the search for one claim on one node when telling
// whether it fits (as bench's first-fit).
const fitSteps = 50_000

// Reserver holds at most one reservation across batches.
type Reserver struct {
	batch int            // batches seen
	seen  map[string]int // pending claims: the last batch they were in
	claim string         // the claim the node is kept for ("" none)
	node  string         // the node kept
	// since: when each running claim was first seen allocated.
	since map[string]time.Time
	// drainable: nodes (by name) where the held claim fits once the
	// node's running claims are gone; computed when the claim is chosen.
	drainable map[string]bool
}

// New is a Reserver without a reservation.
func New() *Reserver { return &Reserver{seen: map[string]int{}} }

// forgetAfter is how many batches a pending claim is remembered after it
// was last seen: a batch may leave out claims that were pending (the
// controller parks a claim that fits nowhere until the inventory changes),
// and a claim seen pending before has waited when it comes back.
const forgetAfter = 100

// Reservation is the outcome of one Apply.
type Reservation struct {
	Claim string // namespace/name of the claim the node is kept for; "" none
	Node  string
	// Drain is the number of running claims on the node when Apply ran,
	// Oldest the time the oldest of them has run (as the Reserver saw it).
	Drain  int
	Oldest time.Duration
	// KeptOff counts the other pending claims kept off the node.
	KeptOff int
}

func (r Reservation) String() string {
	if r.Claim == "" {
		return "no reservation"
	}
	return fmt.Sprintf("node %s kept for %s (%d running claims to finish, the oldest running for %s; %d claims kept off)", r.Node, r.Claim, r.Drain, r.Oldest, r.KeptOff)
}

// Apply is called once per batch, after p is built from objs and before it
// is solved: it updates the reservation and keeps every other pending
// claim of p off the reserved node (model.Problem.KeepOff). The allocated
// claims of objs are the running ones; now is the batch's time (the
// controller's clock, the replay's trace time), which dates when the
// Reserver first saw each running claim.
func (r *Reserver) Apply(ctx context.Context, objs *input.Objects, p *model.Problem, now time.Time) (Reservation, error) {
	r.batch++
	byKey := make(map[string]*model.Claim, len(p.Claims))
	waited := map[string]bool{}
	for _, c := range p.Claims {
		_, waited[c.Key] = r.seen[c.Key]
		r.seen[c.Key] = r.batch
		byKey[c.Key] = c
	}
	allocated := make(map[string]bool, len(p.Allocated))
	for _, c := range p.Allocated {
		allocated[c.Namespace+"/"+c.Name] = true
	}
	for k, b := range r.seen {
		if allocated[k] || r.batch-b > forgetAfter {
			delete(r.seen, k)
		}
	}
	load := r.nodeLoad(p, now) // every batch: it dates the running claims
	held := byKey[r.claim]
	if held == nil && r.claim != "" {
		if _, pending := r.seen[r.claim]; pending {
			// The claim is still pending but left out of this batch: the
			// node stays kept.
			for n, node := range p.Nodes {
				if node.Name == r.node {
					res := Reservation{Claim: r.claim, Node: r.node, Drain: load[n].claims, Oldest: load[n].oldest}
					for _, c := range p.Claims {
						p.KeepOff(c, n)
						res.KeptOff++
					}
					return res, nil
				}
			}
		}
	}
	if held == nil {
		r.claim, r.node, r.drainable = "", "", nil
		for _, c := range p.Claims {
			if !waited[c.Key] || c.Err != nil || fitsNow(p, c) || !pooledFits(p, c) {
				continue
			}
			nodes, err := drainable(ctx, objs, p.Options, c)
			if err != nil {
				return Reservation{}, err
			}
			if len(nodes) > 0 {
				held, r.claim, r.drainable = c, c.Key, nodes
				break
			}
		}
	}
	if held == nil {
		return Reservation{}, nil
	}
	// The node: the one whose running claims are likely to finish first.
	// Departures are not known; cluster job durations are heavy-tailed,
	// where a job's remaining time grows with the time it has run, so a
	// node is as far from drained as its oldest running claim is old. The
	// node held stays unless another is less than half as far (a
	// reservation moved loses what the held node drained), then the
	// fewest running claims, then name order.
	best := -1
	better := func(n, m int) bool {
		if load[n].oldest != load[m].oldest {
			return load[n].oldest < load[m].oldest
		}
		return load[n].claims < load[m].claims
	}
	heldNode := -1
	for n, node := range p.Nodes {
		if !r.drainable[node.Name] {
			continue
		}
		if node.Name == r.node {
			heldNode = n
		}
		if best < 0 || better(n, best) {
			best = n
		}
	}
	if best < 0 {
		// The nodes it could use are gone: give the reservation up.
		r.claim, r.node, r.drainable = "", "", nil
		return Reservation{}, nil
	}
	if heldNode >= 0 && !(2*load[best].oldest < load[heldNode].oldest) {
		best = heldNode
	}
	r.node = p.Nodes[best].Name
	res := Reservation{Claim: r.claim, Node: r.node, Drain: load[best].claims, Oldest: load[best].oldest}
	for _, c := range p.Claims {
		if c != held {
			p.KeepOff(c, best)
			res.KeptOff++
		}
	}
	return res, nil
}

// fitsNow tells whether c fits alone, next to the running claims.
func fitsNow(p *model.Problem, c *model.Claim) bool {
	_, ok := alloc.FirstFit(model.NewState(p), c, fitSteps)
	return ok
}

// pooledFits tells whether the devices c asks for are free in the cluster
// as a whole: each request has, for one of its alternatives, Count
// candidates that can be taken together when nodes are ignored (taken
// greedily in candidate order). A claim that fits nowhere while this holds
// is blocked by how the free devices are spread over nodes, which a
// reservation cures; one that does not is blocked because the cluster is
// full, and the next departure serves it (keeping a node for it would
// only idle the node).
func pooledFits(p *model.Problem, c *model.Claim) bool {
	s := model.NewState(p)
	for _, r := range c.Requests {
		ok := false
		for _, a := range r.Alternatives {
			if a.All {
				ok = true // all of a node's devices: no pooled count
				break
			}
			n := 0
			for _, d := range a.Candidates {
				if n >= a.Count {
					break
				}
				if s.FitsFor(d, a, !a.AdminAccess) {
					s.TakeFor(d, a, !a.AdminAccess)
					n++
				}
			}
			if n >= a.Count {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// drainable lists the nodes where c fits alone on the empty cluster: built
// without any running claim, c is placed, its node noted and kept off, and
// again until it fits nowhere.
func drainable(ctx context.Context, objs *input.Objects, opts model.Options, c *model.Claim) (map[string]bool, error) {
	empty := *objs
	alone := c.Obj.DeepCopy()
	alone.Status = c.Obj.Status
	alone.Status.Allocation = nil
	empty.Claims = append([]*resourceapi.ResourceClaim(nil), alone)
	q, err := model.Build(ctx, &empty, opts)
	if err != nil {
		return nil, fmt.Errorf("reserve: claim %s alone: %w", c.Key, err)
	}
	out := map[string]bool{}
	if len(q.Claims) != 1 {
		return out, nil
	}
	qc := q.Claims[0]
	for range q.Nodes {
		a, ok := alloc.FirstFit(model.NewState(q), qc, fitSteps)
		if !ok || a.Node < 0 {
			break
		}
		out[q.Nodes[a.Node].Name] = true
		q.KeepOff(qc, a.Node)
	}
	return out, nil
}

// nodeLoad is, per node, the allocated claims with a device the node
// reaches (devices on all nodes count for none) and the age of the oldest:
// the time since the Reserver first saw it allocated. It also records the
// claims seen for the first time and forgets those gone.
func (r *Reserver) nodeLoad(p *model.Problem, now time.Time) []nodeLoad {
	byID := make(map[input.DeviceID]*model.Device, len(p.Devices))
	for _, d := range p.Devices {
		byID[d.ID] = d
	}
	out := make([]nodeLoad, len(p.Nodes))
	seen := make(map[string]time.Time, len(p.Allocated))
	for _, c := range p.Allocated {
		key := c.Namespace + "/" + c.Name
		since, ok := r.since[key]
		if !ok {
			since = now
		}
		seen[key] = since
		age := now.Sub(since)
		on := map[int]bool{}
		for _, res := range c.Status.Allocation.Devices.Results {
			d := byID[input.DeviceID{Driver: res.Driver, Pool: res.Pool, Device: res.Device}]
			if d == nil || d.All {
				continue
			}
			for _, n := range d.Reach {
				on[n] = true
			}
		}
		for n := range on {
			out[n].claims++
			out[n].oldest = max(out[n].oldest, age)
		}
	}
	r.since = seen
	return out
}

type nodeLoad struct {
	claims int
	oldest time.Duration
}
