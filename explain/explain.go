// Package explain says why a claim cannot be allocated, in the user's
// terms. It encodes the claim together with the allocations that hold
// devices (encode.Options.Groups: every constraint group guarded by an
// assumption), takes the unsatisfiable core over the groups from gini, and
// reduces it to a minimal one by deletion. Each group of the core becomes a
// reason: a counter used by named claims, a device in use, a compatibility
// group conflict, the one-node rule, a matchAttribute constraint. Requests
// that no device can serve at all are explained without the solver: which
// selector the devices fail, or what excludes the matching ones.
//
// The package does not import the engine: the CLI runs alloc.Run first and
// passes its result as allocations; the engine calls Short for its one-line
// reasons.
package explain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// Reason kinds.
const (
	KindClaim              = "claim"              // the claim itself is invalid or unsupported
	KindNoMatch            = "no-match"           // no device can serve a request
	KindCount              = "count"              // fewer usable devices than the request asks for
	KindNode               = "node"               // the devices cannot all be reached from one node
	KindConstraint         = "constraint"         // matchAttribute / distinctAttribute
	KindCounter            = "counter"            // counters of a counter set are used up
	KindDevice             = "device"             // a device is allocated to another claim
	KindCapacity           = "capacity"           // a shared device's capacity is used up
	KindCompat             = "compat"             // compatibility group conflict
	KindCompatibleOnlyWith = "compatibleOnlyWith" // research extension conflict
	KindAllocation         = "allocation"         // an allocation in the way (not attributed otherwise)
	KindFits               = "fits"               // the claim fits with the given allocations
	KindUnknown            = "unknown"            // the budget ran out
)

// Allocation is a claim holding devices in place: an existing allocation of
// the input, or one made by the allocation run being explained.
type Allocation struct {
	Claim    string           // namespace/name
	Existing bool             // in the input; false: made by this run
	Devices  []input.DeviceID // non-admin results
	// Requests names the request of each of Devices, as results do
	// ("req" or "req/sub"): what a share of a shared device consumes
	// depends on it. Optional for devices that are not shared.
	Requests []string
}

// Reason is one reason of an explanation.
type Reason struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Request string `json:"request,omitempty"`
	// Claims are the allocations involved (namespace/name).
	Claims     []string `json:"claims,omitempty"`
	Devices    []string `json:"devices,omitempty"`
	CounterSet string   `json:"counterSet,omitempty"`
	Counters   []string `json:"counters,omitempty"`
	Node       string   `json:"node,omitempty"`
	Attribute  string   `json:"attribute,omitempty"`
	Selector   string   `json:"selector,omitempty"`
}

func (r Reason) String() string { return r.Message }

// Explanation answers "why can the claim not be allocated" (or, with
// Options.Prefer, "why not with that subrequest").
type Explanation struct {
	Claim    string   `json:"claim"`
	Question string   `json:"question"`
	Reasons  []Reason `json:"reasons"`
	// Minimal is true when the core was reduced to a minimal one (every
	// reason is needed); false when the budget ran out first.
	Minimal bool    `json:"minimal"`
	WhatIf  *WhatIf `json:"whatIf,omitempty"`
}

// Options for one explanation.
type Options struct {
	// Deadline for the solver calls; zero means 10 s from now.
	Deadline time.Time
	// Prefer asks about specific alternatives: request index -> alternative
	// index that must be used ("why not its first subrequest?").
	Prefer map[int]int
	// WhatIf also computes the fewest allocations to release (see WhatIf).
	WhatIf bool
}

// ErrNotPending is returned for a claim that is not a pending claim of p.
var ErrNotPending = errors.New("not a pending claim")

type explainer struct {
	p      *model.Problem
	cel    *celCache
	allocs []Allocation
	// fixed[i] lists device indices of allocs[i] that p knows; amounts[i]
	// what each consumes of a shared device (encode.Fixed.Amounts).
	fixed   [][]int
	amounts [][][]int64
	// existing holders per device, from p.Allocated (existing allocations
	// baked into p).
	baked map[int][]string
	// noMatchMemo caches no-match reasons per request shape (Short).
	noMatchMemo *sync.Map
}

// memo keeps the CEL cache and no-match reasons of the last problem Short
// was called for: the engine asks for one reason per unallocated claim, and
// many claims share their requests' shape. One entry only, so a long-lived
// caller does not accumulate problems.
var memo struct {
	sync.Mutex
	p       *model.Problem
	cel     *celCache
	noMatch *sync.Map
}

func shortMemo(p *model.Problem) (*celCache, *sync.Map) {
	memo.Lock()
	defer memo.Unlock()
	if memo.p != p {
		memo.p, memo.cel, memo.noMatch = p, newCEL(), &sync.Map{}
	}
	return memo.cel, memo.noMatch
}

func newExplainer(p *model.Problem, allocs []Allocation) *explainer {
	e := &explainer{p: p, cel: newCEL(), allocs: allocs, baked: map[int][]string{}}
	byID := map[input.DeviceID]int{}
	for _, d := range p.Devices {
		byID[d.ID] = d.Index
	}
	claims := map[string]*model.Claim{}
	for _, c := range p.Claims {
		claims[c.Key] = c
	}
	for _, a := range allocs {
		var ds []int
		var amounts [][]int64
		for k, id := range a.Devices {
			i, ok := byID[id]
			if !ok {
				continue
			}
			ds = append(ds, i)
			var am []int64
			if p.Devices[i].MultiAlloc && k < len(a.Requests) {
				am = shareAmounts(claims[a.Claim], a.Requests[k], i)
			}
			amounts = append(amounts, am)
		}
		e.fixed = append(e.fixed, ds)
		e.amounts = append(e.amounts, amounts)
	}
	for _, c := range p.Allocated {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			if i, ok := byID[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]; ok {
				e.baked[i] = append(e.baked[i], c.Namespace+"/"+c.Name)
			}
		}
	}
	return e
}

// holdersOfDevice names the claims holding device d: existing allocations
// baked into p, and the given allocations.
func (e *explainer) holdersOfDevice(d int) []string {
	out := append([]string(nil), e.baked[d]...)
	for i, ds := range e.fixed {
		for _, x := range ds {
			if x == d {
				out = append(out, e.allocs[i].Claim)
			}
		}
	}
	return out
}

// Explain explains why target (a pending claim of p) cannot be allocated
// while allocs hold their devices. For fully named reasons, p should be
// built without existing allocations and allocs should list them (the CLI
// does this); with a regular p, existing allocations are part of p and are
// named from p.Allocated where possible.
func Explain(ctx context.Context, p *model.Problem, target *model.Claim, allocs []Allocation, opts Options) (*Explanation, error) {
	if target == nil || target.Index >= len(p.Claims) || p.Claims[target.Index] != target {
		return nil, ErrNotPending
	}
	return newExplainer(p, allocs).explain(ctx, target, opts)
}

func (e *explainer) explain(ctx context.Context, target *model.Claim, opts Options) (*Explanation, error) {
	if opts.Deadline.IsZero() {
		opts.Deadline = time.Now().Add(10 * time.Second)
	}
	x := &Explanation{Claim: target.Key, Question: QuestionNotAllocated, Minimal: true}
	if len(opts.Prefer) > 0 {
		var names []string
		for ri, ai := range opts.Prefer {
			if ri < len(target.Requests) && ai < len(target.Requests[ri].Alternatives) {
				names = append(names, target.Requests[ri].Alternatives[ai].Name)
			}
		}
		sort.Strings(names)
		x.Question = "why can it not use " + strings.Join(names, ", ") + "?"
	}
	// The selectors the static reasons evaluate stop at the deadline too.
	sctx, cancel := context.WithDeadline(ctx, opts.Deadline)
	r, ok := e.static(sctx, target, opts.Prefer)
	cancel()
	if ok {
		x.Reasons = []Reason{r}
	} else {
		reasons, minimal, err := e.core(ctx, target, opts)
		if err != nil {
			return nil, err
		}
		x.Reasons, x.Minimal = reasons, minimal
	}
	if opts.WhatIf {
		w, err := e.whatIf(ctx, target, opts)
		if err != nil {
			return nil, err
		}
		x.WhatIf = w
	}
	return x, nil
}

// QuestionNotAllocated is the question an explanation of an unallocated
// claim answers.
const QuestionNotAllocated = "why is it not allocated?"

// ReasonBudget bounds the solver time spent explaining one claim in
// Reasons.
const ReasonBudget = 250 * time.Millisecond

// FillReasons sets the rejection of each claim in claims (indexes into
// p.Claims, which fit nowhere even alone) to its one-line reason (Short),
// each found within ReasonBudget and all before deadline; it stops when ctx
// ends. Claims it could not explain in time, or that fit alone after all,
// keep the rejection they had.
func FillReasons(ctx context.Context, p *model.Problem, claims []int, rejected map[int]error, deadline time.Time) {
	for _, i := range claims {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		end := time.Now().Add(ReasonBudget)
		if deadline.Before(end) {
			end = deadline
		}
		if why, ok := Short(ctx, p, p.Claims[i], end); ok {
			rejected[i] = model.Reject(model.ReasonNoPlacement, errors.New(why))
		}
	}
}

// Short is the one-line reason the engine gives for an unallocated claim
// that does not fit even alone; p is the run's problem, with existing
// allocations in it. ok is false when the claim does fit alone.
func Short(ctx context.Context, p *model.Problem, c *model.Claim, deadline time.Time) (reason string, ok bool) {
	if c == nil || c.Index >= len(p.Claims) || p.Claims[c.Index] != c {
		return "", false
	}
	e := newExplainer(p, nil)
	e.cel, e.noMatchMemo = shortMemo(p)
	x, err := e.explain(ctx, c, Options{Deadline: deadline})
	if err != nil {
		return "", false
	}
	var parts []string
	for _, r := range x.Reasons {
		if r.Kind == KindFits {
			return "", false
		}
		parts = append(parts, r.Message)
	}
	reason = strings.Join(parts, "; ")
	// Pools left out may hold what the claim needs: say so (upstream
	// fails such an allocation with "invalid resource pools were
	// encountered").
	if len(p.Issues) > 0 && len(parts) > 0 && !strings.Contains(reason, "pools are not used") {
		reason += fmt.Sprintf("; note: %d pools are not used (%s)", len(p.Issues), p.Issues[0])
	}
	return reason, len(parts) > 0
}

// static finds a request that no device can serve, or a claim error,
// without the solver.
func (e *explainer) static(ctx context.Context, c *model.Claim, prefer map[int]int) (Reason, bool) {
	if c.Err != nil {
		return Reason{Kind: KindClaim, Message: c.Err.Error()}, true
	}
	for ri, r := range c.Requests {
		alts := r.Alternatives
		if ai, ok := prefer[ri]; ok && ai < len(alts) {
			alts = alts[ai : ai+1]
		}
		usable := false
		for _, a := range alts {
			if len(a.Candidates) > 0 && (a.All || len(a.Candidates) >= a.Count) {
				usable = true
			}
		}
		if usable {
			continue
		}
		a := alts[0]
		if len(a.Candidates) == 0 {
			if e.noMatchMemo == nil {
				r, _ := e.noMatch(ctx, c, ri, a)
				return r, true
			}
			key := fmt.Sprintf("%s|%v|%v|%t", a.Name, altSelectors(c, ri, a), altTolerations(c, ri, a), a.AdminAccess)
			if r, ok := e.noMatchMemo.Load(key); ok {
				return r.(Reason), true
			}
			r, done := e.noMatch(ctx, c, ri, a)
			if done { // an unfinished reason is not one to reuse
				e.noMatchMemo.Store(key, r)
			}
			return r, true
		}
		return Reason{Kind: KindCount, Request: a.Name, Message: fmt.Sprintf("request %s asks for %d devices, but only %d can serve it", a.Name, a.Count, len(a.Candidates))}, true
	}
	return Reason{}, false
}

// model encodes target alone with the allocations in place, every
// constraint group guarded.
func (e *explainer) encode(ctx context.Context, claims []*model.Claim) (*encode.Model, error) {
	var fixed []encode.Fixed
	for i, a := range e.allocs {
		fixed = append(fixed, encode.Fixed{Name: a.Claim, Devices: e.fixed[i], Amounts: e.amounts[i]})
	}
	return encode.Encode(ctx, e.p, claims, encode.Options{Groups: true, PerClaim: true, Fixed: fixed})
}

// goal is the assumptions that ask for target (and preferred alternatives).
func goal(m *encode.Model, prefer map[int]int) []z.Lit {
	u := m.Units[0]
	g := []z.Lit{u.Admit}
	for ri, ai := range prefer {
		if ri < len(u.Sel) && ai < len(u.Sel[ri]) {
			g = append(g, u.Sel[ri][ai])
		}
	}
	return g
}

// fitsReason answers for a claim that fits next to the allocations.
var fitsReason = Reason{Kind: KindFits, Message: "the claim fits with the current allocations (the allocation run left it out, e.g. for a better objective value, or ran out of time)"}

// core solves with every group assumed, and reduces the failed assumptions
// to a minimal unsatisfiable set by deletion. A claim whose devices are
// node-local is explained node by node (bynode.go).
func (e *explainer) core(ctx context.Context, target *model.Claim, opts Options) ([]Reason, bool, error) {
	if nodes, ok := e.splitNodes(target); ok {
		return e.coreByNode(ctx, target, nodes, opts)
	}
	m, err := e.encode(ctx, []*model.Claim{target})
	if err != nil {
		return nil, false, err
	}
	s := solver.New(m.C, m.Clauses)
	g := goal(m, opts.Prefer)
	byLit := map[z.Lit]int{}
	var all []z.Lit
	for i, gr := range m.Groups {
		byLit[gr.Lit] = i
		all = append(all, gr.Lit)
	}
	solve := func(groups []z.Lit) solver.Result {
		return s.Solve(ctx, opts.Deadline, append(append([]z.Lit(nil), g...), groups...)...)
	}
	// keep filters lits to the failed assumptions that are groups, in the
	// order of from.
	keep := func(from []z.Lit) []z.Lit {
		why := map[z.Lit]bool{}
		for _, l := range s.Why() {
			why[l] = true
		}
		var out []z.Lit
		for _, l := range from {
			if why[l] {
				out = append(out, l)
			}
		}
		return out
	}
	switch solve(all) {
	case solver.Sat:
		return []Reason{fitsReason}, true, nil
	case solver.Unknown:
		return e.unknown(ctx), false, nil
	}
	cur, minimal := minimize(keep(all), solve, keep)
	var groups []encode.Group
	for _, l := range cur {
		groups = append(groups, m.Groups[byLit[l]])
	}
	reasons := e.reasons(target, m, groups)
	if len(reasons) == 0 {
		reasons = e.structural(target, opts.Prefer)
	}
	return reasons, minimal, nil
}

func (e *explainer) unknown(ctx context.Context) []Reason {
	msg := "the time budget ran out before the solver decided (raise --timeout)"
	if errors.Is(ctx.Err(), context.Canceled) {
		msg = "interrupted before the solver decided"
	}
	return []Reason{{Kind: KindUnknown, Message: msg}}
}

// structural explains a claim that cannot be satisfied even with every
// group dropped: the requests themselves cannot be met by their devices
// (for instance allocationMode All with a device that cannot be taken).
func (e *explainer) structural(c *model.Claim, prefer map[int]int) []Reason {
	for ri, r := range c.Requests {
		a := r.Alternatives[0]
		if ai, ok := prefer[ri]; ok {
			a = r.Alternatives[ai]
		}
		if a.All && len(a.AllMatch) > len(a.Candidates) {
			return []Reason{{Kind: KindCount, Request: a.Name, Message: fmt.Sprintf("request %s asks for all %d matching devices (allocationMode All), but only %d of them can be allocated",
				a.Name, len(a.AllMatch), len(a.Candidates))}}
		}
	}
	return []Reason{{Kind: KindCount, Message: "the requests cannot all be served by distinct matching devices"}}
}

// minimize reduces an unsatisfiable set of group assumptions to a minimal
// one by deletion: each member is dropped in turn, and stays dropped when
// the rest is still unsatisfiable (then the solver's failed assumptions
// shrink the set further). A member whose removal makes the rest
// satisfiable is needed, and stays needed in every subset. minimal is false
// when a solve ran out of budget.
func minimize(cur []z.Lit, solve func([]z.Lit) solver.Result, keep func([]z.Lit) []z.Lit) ([]z.Lit, bool) {
	for i := 0; i < len(cur); {
		try := append(append([]z.Lit(nil), cur[:i]...), cur[i+1:]...)
		switch solve(try) {
		case solver.Unsat:
			cur = keep(try)
		case solver.Sat:
			i++
		default:
			return cur, false
		}
	}
	return cur, true
}

// shareAmounts is what claim c's request (result name req) consumes of
// shared device d, when p has the claim (explanations build p with every
// claim pending, so existing allocations are among its claims); nil
// otherwise.
func shareAmounts(c *model.Claim, req string, d int) []int64 {
	if c == nil {
		return nil
	}
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			if a.Name == req {
				return a.CapacityAmounts(d)
			}
		}
	}
	return nil
}
