package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/input"
	"github.com/google/uuid"
)

// orderSteps bounds the checker's search per claim and node.
const orderSteps = 20000

// checkSearchOrder: rule 10, selector errors and the allocator's search
// order. The allocator takes a claim's requests in order and each request's
// first fitting devices in publication order (pools by driver and name,
// those with binding conditions last; slices by name), backtracking only on
// a miss. An error aborts the pod's scheduling attempt, whatever other
// nodes offer. Errors are: a class or request selector failing at run time
// on a device of the node's slices, for allocationMode All on any of them
// (evaluated before the search), for other requests on a device the search
// reaches that is not held; a derivedAttributes expression a constraint
// uses failing on a device the search tries (after its counters and
// capacity fit); and, for All, a device that breaks a claim constraint. So:
//   - no All request or subrequest of the claim has a selector failing on a
//     device some node's slices publish;
//   - where the claim has an All request under a constraint, a selector
//     failing at run time, or a derived attribute failing on a device the
//     search may try: on no node the claim may be tried on does the
//     search, run from the existing allocations alone, end in an error;
//   - where that depends on the search's earlier picks (an All request
//     under a constraint after other picks, a selector or derived
//     attribute error), the
//     claim's results are the devices the search picks on some node.
//
// The search asks the checker itself whether a partial allocation is valid:
// the claim cut after the request being filled, that request asking for
// exactly the devices picked so far.
func (c *checker) checkSearchOrder(nc *newClaim, before *predecessors) {
	if c.inSearch {
		return
	}
	nodes := c.w.nodes
	if b, ok := c.fixed[nc.key]; ok {
		nodes = []*corev1.Node{c.w.nodeByName[b.node]}
		if nodes[0] == nil {
			nodes[0] = &corev1.Node{}
			nodes[0].Name = b.node
		}
	}
	if len(nodes) == 0 {
		nodes = []*corev1.Node{nil}
	}
	if err := c.allSelectorError(nc, nodes); err != "" {
		c.errorf("claim %s: %s (the scheduler's allocator fails there)", nc.key, err)
		return
	}
	if err := c.resultLimitError(nc, nodes); err != "" {
		c.errorf("claim %s: %s (the scheduler's allocator fails there)", nc.key, err)
		return
	}
	first, ordered := c.orderKinds(nc.in)
	if !first && !ordered {
		return
	}
	var picks []string
	matched := false
	for _, n := range nodes {
		s := &orderSearch{c: c, nc: nc, node: n, steps: orderSteps, until: len(nc.in.Spec.Devices.Requests), before: before}
		if !ordered {
			s.until = 1
		}
		ok := s.request(0)
		where := "with no nodes"
		if n != nil {
			where = "on node " + n.Name
		}
		if !ok && s.exceeded && s.err == "" {
			s.err = fmt.Sprintf("the results would exceed the limit of %d", maxResults)
		}
		switch {
		case s.err != "":
			c.errorf("claim %s: the scheduler's allocator fails %s: %s", nc.key, where, s.err)
			return
		case s.steps <= 0 && ordered:
			c.errorf("claim %s: the scheduler's search %s was not followed within %d steps, so the allocation cannot be confirmed", nc.key, where, orderSteps)
			return
		case ok && ordered:
			got := resultList(s.results)
			picks = append(picks, where+": "+got)
			if got == resultList(nc.alloc.Devices.Results) {
				matched = true
			}
		}
	}
	if ordered && !matched {
		c.errorf("claim %s: whether the scheduler's allocator fails depends on its search order, so the results (%s) must be what it picks from the existing allocations (%s)",
			nc.key, resultList(nc.alloc.Devices.Results), strings.Join(picks, "; "))
	}
}

// checkSearchOrders runs rule 10 for every new claim. The scheduler places
// pending claims one at a time, each searched with the claims placed
// before it allocated; the allocation is valid when some order of the new
// claims gives each its results without an error on any node. Two orders
// are tried: the engine's (every such claim searched from the existing
// allocations alone: it keeps rival claims apart, see model/searchorder.go;
// those it places last searched with the others allocated), and the input
// order (the order a scheduler taking the claims as they come
// would use: each claim searched with the new claims listed before it).
func (c *checker) checkSearchOrders() {
	if c.inSearch {
		return
	}
	start := len(c.errs)
	failing := map[string]bool{}
	for _, nc := range c.newClaims {
		before := len(c.errs)
		c.checkSearchOrder(nc, nil)
		if len(c.errs) > before {
			failing[nc.key] = true
		}
	}
	if len(c.errs) == start {
		return
	}
	alone := slices.Clone(c.errs[start:])
	c.errs = c.errs[:start]
	// The engine places such claims after all others (alloc's placeLast):
	// each claim failing above is searched with every other new claim
	// placed before it, but the failing ones after it (input order).
	pos := map[string]int{}
	for i, cl := range c.objs.Claims {
		pos[claimKey(cl)] = i
	}
	inOrder := slices.Clone(c.newClaims)
	slices.SortStableFunc(inOrder, func(a, b *newClaim) int { return pos[a.key] - pos[b.key] })
	var others, late []*newClaim
	for _, nc := range inOrder {
		if failing[nc.key] {
			late = append(late, nc)
		} else {
			others = append(others, nc)
		}
	}
	last := &predecessors{}
	for _, nc := range others {
		last.add(c, nc)
	}
	for _, nc := range late {
		c.checkSearchOrder(nc, last)
		last.add(c, nc)
	}
	if len(c.errs) == start {
		return
	}
	c.errs = c.errs[:start]
	before := &predecessors{}
	for _, nc := range inOrder {
		c.checkSearchOrder(nc, before)
		before.add(c, nc)
	}
	if len(c.errs) > start {
		c.errs = append(c.errs[:start], alone...)
	}
}

// predecessors are the new claims placed before the one being searched:
// the scheduler sees them allocated.
type predecessors struct {
	objs   *input.Objects // the input with the predecessors allocated
	input  map[string]*resourceapi.ResourceClaim
	claims []*newClaim
}

// add places nc after the predecessors: the objects the checker reads for
// the next claim have nc allocated.
func (p *predecessors) add(c *checker, nc *newClaim) {
	p.claims = append(p.claims, nc)
	allocated := map[string]*resourceapi.ResourceClaim{}
	for _, pc := range p.claims {
		allocated[pc.key] = pc.out
	}
	objs := *c.objs
	objs.Claims = nil
	for _, cl := range c.objs.Claims {
		if out, ok := allocated[claimKey(cl)]; ok && c.input[claimKey(cl)] == cl {
			cl = out
		}
		objs.Claims = append(objs.Claims, cl)
	}
	p.input = maps.Clone(c.input)
	for k, out := range allocated {
		p.input[k] = out
	}
	p.objs = &objs
}

// orderKinds: first, the claim's first request (first subrequest) is All
// under a constraint; ordered, an All request or subrequest elsewhere is,
// or a selector of a request that is not All fails at run time on some
// device.
func (c *checker) orderKinds(claim *resourceapi.ResourceClaim) (first, ordered bool) {
	for ri := range claim.Spec.Devices.Requests {
		for ai, a := range requestAlts(&claim.Spec.Devices.Requests[ri]) {
			if c.derivedErrorAnywhere(claim, a) {
				ordered = true
			}
			if a.mode != resourceapi.DeviceAllocationModeAll {
				if c.anySelectorError(a) {
					ordered = true
				}
				continue
			}
			for _, con := range claim.Spec.Devices.Constraints {
				if constraintApplies(con.Requests, a.name) {
					if ri == 0 && ai == 0 {
						first = true
					} else {
						ordered = true
					}
				}
			}
		}
	}
	return first, ordered
}

// derivedErrors lists the derivedAttributes expressions of a that a
// constraint of the claim uses.
func derivedErrors(claim *resourceapi.ResourceClaim, a *alt) []string {
	var exprs []string
	for _, con := range claim.Spec.Devices.Constraints {
		attr := con.MatchAttribute
		if attr == nil {
			attr = con.DistinctAttribute
		}
		if attr == nil || !constraintApplies(con.Requests, a.name) {
			continue
		}
		if expr, ok := derivedExpression(claim, a.name, *attr); ok {
			exprs = append(exprs, expr)
		}
	}
	return exprs
}

// derivedError is the error of a derivedAttributes expression a's
// constraints use, on d (nil if none).
func (c *checker) derivedError(claim *resourceapi.ResourceClaim, a *alt, d *device) error {
	for _, expr := range derivedErrors(claim, a) {
		if _, err := c.derivedAttribute(expr, d); err != nil {
			return err
		}
	}
	return nil
}

// derivedErrorAnywhere tells whether such an expression fails on a device
// the allocator could try for a: in a usable pool, matching its selectors,
// tolerated, not held by an existing claim (unless admin access), its
// capacities able to serve the request, and allocatable on some node (the
// allocator evaluates derived attributes in allocateDevice, after its
// isSelectable has checked the device's nodes: a device no node reaches,
// or a pool generation no node uses, is never tried).
func (c *checker) derivedErrorAnywhere(claim *resourceapi.ResourceClaim, a *alt) bool {
	if len(derivedErrors(claim, a)) == 0 {
		return false
	}
	held := map[devKey]bool{}
	for _, p := range c.placements {
		if !p.isNew && !p.admin && !p.isShare() {
			held[keyOf(p.res)] = true
		}
	}
	class := c.classes[a.class]
	for _, pl := range c.w.poolOrder {
		if pl.issue != "" {
			continue
		}
		for _, d := range pl.devices {
			if !c.matchesAll(class, a.selectors, d) || untoleratedTaint(d.spec, a.tolerations) != nil || held[d.key] && !a.admin || !c.triedSomewhere(d) {
				continue
			}
			if _, fits, _ := consumption(a.capacity, d.spec.Capacity); fits && c.derivedError(claim, a, d) != nil {
				return true
			}
		}
	}
	return false
}

// triedSomewhere tells whether some node's search can try d: the node
// uses d's pool generation, d's slice is published for it and d is
// allocatable there (without nodes: d is available everywhere).
func (c *checker) triedSomewhere(d *device) bool {
	if len(c.w.nodes) == 0 {
		return availableEverywhere(d)
	}
	for _, n := range c.w.nodes {
		if c.w.view(n, d.key.pool()) != d.pool || !c.w.sliceRelevant(d.slice, n) {
			continue
		}
		if ok, _ := c.w.allocatable(d, n); ok {
			return true
		}
	}
	return false
}

// anySelectorError tells whether a's selectors fail at run time on some
// device a node's search looks at (cached per class and selectors: many
// claims share them). The allocator evaluates selectors only on the devices
// of the node's slices (GatherPools keeps the slices whose node selection
// matches the node, and allocateOne walks a pool's
// DeviceSlicesTargetingNode): a device whose slice no node sees can fail
// no search, so it makes no claim depend on the search order.
func (c *checker) anySelectorError(a *alt) bool {
	key := a.class
	for _, sel := range a.selectors {
		if sel.CEL == nil {
			key += "\x00<none>"
		} else {
			key += "\x00" + sel.CEL.Expression
		}
	}
	if v, ok := c.w.selErr[key]; ok {
		return v
	}
	v := false
	nodes := c.w.nodes
	if len(nodes) == 0 {
		nodes = []*corev1.Node{nil}
	}
	seen := map[*device]bool{}
search:
	for _, n := range nodes {
		for _, pl := range c.slicesOn(n) {
			if pl.issue != "" {
				continue
			}
			for _, d := range pl.devices {
				if seen[d] || n != nil && !c.w.sliceRelevant(d.slice, n) {
					continue
				}
				seen[d] = true
				if c.selectorError(a, d) != nil {
					v = true
					break search // one is enough
				}
			}
		}
	}
	c.w.selErr[key] = v
	return v
}

// selectorError is the run-time error of a's class or request selectors on
// d (nil if none).
func (c *checker) selectorError(a *alt, d *device) error {
	class := c.classes[a.class]
	if class == nil {
		return nil
	}
	for _, sels := range [][]resourceapi.DeviceSelector{class.Spec.Selectors, a.selectors} {
		for _, sel := range sels {
			if sel.CEL == nil {
				return nil
			}
			ok, err := c.w.eval(sel.CEL.Expression, d)
			if err != nil {
				return err
			}
			if !ok {
				return nil // upstream stops at the first false selector
			}
		}
	}
	return nil
}

// slicesOn lists, in the allocator's order, the usable pools' slices the
// node's search looks at (nil node: every slice of the pools in use).
func (c *checker) slicesOn(n *corev1.Node) []*pool {
	pools := c.w.poolOrder
	if n != nil {
		pools = c.w.viewsOf(n)
	}
	var early, late []*pool
	for _, pl := range pools {
		if n != nil && !slices.ContainsFunc(pl.slices, func(sl *resourceapi.ResourceSlice) bool { return c.w.sliceRelevant(sl, n) }) {
			continue
		}
		if slices.ContainsFunc(pl.devices, func(d *device) bool { return d.spec.BindingConditions != nil }) {
			late = append(late, pl)
		} else {
			early = append(early, pl)
		}
	}
	return append(early, late...)
}

// allSelectorError: the allocator evaluates an All request's selectors on
// every device of the node's slices before it searches; a run-time error on
// any node fails the claim.
func (c *checker) allSelectorError(nc *newClaim, nodes []*corev1.Node) string {
	for ri := range nc.in.Spec.Devices.Requests {
		for _, a := range requestAlts(&nc.in.Spec.Devices.Requests[ri]) {
			if a.mode != resourceapi.DeviceAllocationModeAll {
				continue
			}
			for _, n := range nodes {
				for _, pl := range c.slicesOn(n) {
					for _, d := range pl.devices {
						if !c.w.sliceRelevant(d.slice, n) && n != nil || pl.issue != "" {
							continue
						}
						if err := c.selectorError(a, d); err != nil {
							return fmt.Sprintf("request %s (allocationMode All): a selector fails on device %s: %v", a.name, d.key, err)
						}
					}
				}
			}
		}
	}
	return ""
}

// resultLimitError: before it searches, the allocator adds up on each node
// the fewest results every request could take there (a firstAvailable
// request its smallest subrequest; allocationMode All every matching
// device the node sees) and fails past the limit of 32.
func (c *checker) resultLimitError(nc *newClaim, nodes []*corev1.Node) string {
	for _, n := range nodes {
		s := &orderSearch{c: c, nc: nc, node: n}
		sum := 0
		for ri := range nc.in.Spec.Devices.Requests {
			least := -1
			for _, a := range requestAlts(&nc.in.Spec.Devices.Requests[ri]) {
				k := int(max(a.count, 1))
				if a.mode == resourceapi.DeviceAllocationModeAll {
					devs, _ := s.devices(a, true)
					k = len(devs)
				}
				if least < 0 || k < least {
					least = k
				}
			}
			if least > maxResults-sum {
				where := "with no nodes"
				if n != nil {
					where = "on node " + n.Name
				}
				return fmt.Sprintf("request %s: adding %d devices exceeds the limit of %d results, with %d already accounted for, %s",
					nc.in.Spec.Devices.Requests[ri].Name, least, maxResults, sum, where)
			}
			sum += least
		}
	}
	return ""
}

func requestAlts(r *resourceapi.DeviceRequest) []*alt {
	if r.Exactly != nil {
		return []*alt{exactAlt(r)}
	}
	var out []*alt
	for i := range r.FirstAvailable {
		out = append(out, subAlt(r, &r.FirstAvailable[i]))
	}
	return out
}

// resultList is a claim's results as request=device, sorted per request.
func resultList(rs []resourceapi.DeviceRequestAllocationResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Request+"="+keyOf(&r).String())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// orderSearch is the allocator's search for one claim on one node.
type orderSearch struct {
	c       *checker
	nc      *newClaim
	node    *corev1.Node // nil: no nodes at all
	steps   int
	until   int // the request at which the search counts as done
	results []resourceapi.DeviceRequestAllocationResult
	err     string
	before  *predecessors // new claims placed before this one (nil: none)
	// exceeded: a request would take the claim past the result limit; the
	// allocator unwinds to the nearest firstAvailable request, which tries
	// its next subrequest, without trying other devices before.
	exceeded bool
}

func (s *orderSearch) request(ri int) bool {
	if ri == s.until {
		return true
	}
	allExceeded := true
	for ai, a := range requestAlts(&s.nc.in.Spec.Devices.Requests[ri]) {
		if s.steps <= 0 || s.err != "" {
			return false
		}
		s.exceeded = false
		if a.mode == resourceapi.DeviceAllocationModeAll {
			if s.all(ri, ai, a) {
				return true
			}
		} else if count := int(max(a.count, 1)); len(s.results)+count > maxResults {
			s.exceeded = true
		} else {
			devs, errs := s.devices(a, false)
			if s.pick(ri, ai, a, devs, errs, 0, count) {
				return true
			}
		}
		allExceeded = allExceeded && s.exceeded
	}
	s.exceeded = allExceeded
	return false
}

func (s *orderSearch) pick(ri, ai int, a *alt, devs []*device, errs map[*device]error, from, need int) bool {
	if need == 0 {
		return s.request(ri + 1)
	}
	for i := from; i < len(devs); i++ {
		if s.steps--; s.steps <= 0 || s.err != "" {
			return false
		}
		if err := errs[devs[i]]; err != nil {
			if !s.held(a, devs[i]) {
				s.err = fmt.Sprintf("request %s: a selector fails on device %s: %v", a.name, devs[i].key, err)
				return false
			}
			continue
		}
		s.results = append(s.results, s.result(a, devs[i]))
		if s.valid(ri, ai, false, true) {
			if err := s.c.derivedError(s.nc.in, a, devs[i]); err != nil {
				s.err = fmt.Sprintf("request %s: derived attribute on device %s: %v", a.name, devs[i].key, err)
				s.results = s.results[:len(s.results)-1]
				return false
			}
			if s.valid(ri, ai, true, true) && s.pick(ri, ai, a, devs, errs, i+1, need-1) {
				return true
			}
		}
		s.results = s.results[:len(s.results)-1]
		if s.exceeded {
			return false
		}
	}
	return false
}

// all adds every matching device the node sees; a device that cannot be
// added ends the attempt, one that only breaks a constraint is an error.
func (s *orderSearch) all(ri, ai int, a *alt) bool {
	devs, _ := s.devices(a, true)
	if devs == nil {
		return false
	}
	if len(s.results)+len(devs) > maxResults {
		s.exceeded = true
		return false
	}
	before := len(s.results)
	for _, d := range devs {
		if s.steps--; s.steps <= 0 {
			s.results = s.results[:before]
			return false
		}
		// The allocator checks the constraints before the capacity left.
		s.results = append(s.results, s.result(a, d))
		if !s.valid(ri, ai, false, false) {
			s.results = s.results[:before]
			return false
		}
		if err := s.c.derivedError(s.nc.in, a, d); err != nil {
			s.err = fmt.Sprintf("request %s: derived attribute on device %s: %v", a.name, d.key, err)
			s.results = s.results[:before]
			return false
		}
		if !s.valid(ri, ai, true, false) {
			s.err = fmt.Sprintf("request %s: adding device %s breaks a claim constraint", a.name, d.key)
			s.results = s.results[:before]
			return false
		}
		if !s.valid(ri, ai, true, true) {
			s.results = s.results[:before]
			return false
		}
	}
	if s.request(ri + 1) {
		return true
	}
	s.results = s.results[:before]
	return false
}

// devices lists, in the allocator's order, the devices of the node's slices
// that match a's class and selectors: for All every one the node sees (nil
// when a pool the node sees is not usable, or none matches), else those it
// may allocate, and those where a selector fails (in errs).
func (s *orderSearch) devices(a *alt, all bool) (devs []*device, errs map[*device]error) {
	class := s.c.classes[a.class]
	for _, pl := range s.c.slicesOn(s.node) {
		if pl.issue != "" {
			if all {
				return nil, nil
			}
			continue
		}
		for _, d := range pl.devices {
			if s.node != nil && !s.c.w.sliceRelevant(d.slice, s.node) {
				continue
			}
			if err := s.c.selectorError(a, d); err != nil && !all {
				if errs == nil {
					errs = map[*device]error{}
				}
				errs[d] = err
				devs = append(devs, d)
				continue
			}
			var ok bool
			switch {
			case s.node == nil:
				ok = availableEverywhere(d)
			case all:
				ok, _ = s.c.w.reach(d, s.node)
			default:
				ok, _ = s.c.w.allocatable(d, s.node)
			}
			if _, fits, _ := consumption(a.capacity, d.spec.Capacity); ok && fits && s.c.matchesAll(class, a.selectors, d) {
				devs = append(devs, d)
			}
		}
	}
	return devs, errs
}

// held tells whether the allocator passes over d without evaluating
// selectors: an existing claim holds it, or (unless shared) this claim
// took it already.
func (s *orderSearch) held(a *alt, d *device) bool {
	mine := false
	for _, r := range s.results {
		if keyOf(&r) == d.key {
			mine = true
		}
	}
	if a.admin {
		return mine && !shared(d)
	}
	if mine && !shared(d) {
		return true
	}
	for _, p := range s.c.placements {
		if !p.isNew && !p.admin && !p.isShare() && keyOf(p.res) == d.key {
			return true
		}
	}
	if s.before != nil {
		for _, pc := range s.before.claims {
			for _, p := range pc.placements {
				if !p.admin && !p.isShare() && keyOf(p.res) == d.key {
					return true
				}
			}
		}
	}
	return false
}

// result is the allocation result the allocator writes for d serving a.
func (s *orderSearch) result(a *alt, d *device) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: a.name, Driver: d.key.Driver, Pool: d.key.Pool, Device: d.key.Device,
		Tolerations: a.tolerations, BindingConditions: d.spec.BindingConditions, BindingFailureConditions: d.spec.BindingFailureConditions,
		SkipNodeOperations: d.slice.Spec.SkipNodeOperations}
	if a.admin {
		r.AdminAccess = &a.admin
	}
	if shared(d) {
		id := types.UID(uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d", s.nc.key, len(s.results))).String())
		r.ShareID = &id
		r.ConsumedCapacity, _, _ = consumption(a.capacity, d.spec.Capacity)
	}
	return r
}

// valid asks the checker whether the results so far are a valid allocation
// of the claim cut after request ri, which asks for exactly the devices
// picked for it (with or without the claim's constraints, and the capacity
// left on shared devices), given the existing allocations.
func (s *orderSearch) valid(ri, ai int, constraints, capacity bool) bool {
	in := s.nc.in.DeepCopy()
	in.Spec.Devices.Requests = in.Spec.Devices.Requests[:ri+1]
	n := int64(0)
	for _, r := range s.results {
		if parent, _, _ := strings.Cut(r.Request, "/"); parent == in.Spec.Devices.Requests[ri].Name {
			n++
		}
	}
	if r := &in.Spec.Devices.Requests[ri]; r.Exactly != nil {
		r.Exactly.AllocationMode, r.Exactly.Count = resourceapi.DeviceAllocationModeExactCount, n
	} else {
		r.FirstAvailable[ai].AllocationMode, r.FirstAvailable[ai].Count = resourceapi.DeviceAllocationModeExactCount, n
	}
	if !constraints {
		in.Spec.Devices.Constraints = nil
	}
	out := in.DeepCopy()
	out.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: slices.Clone(s.results)}}
	for _, r := range s.results {
		var d *device
		if v := s.c.w.view(s.node, keyOf(&r).pool()); v != nil {
			d = s.c.w.entryOn(v, r.Device, s.node) // the node's generation of the device
		}
		// A device that binds to its node pins the result to the node too,
		// wherever it is published (the allocator's createNodeSelector).
		if s.node != nil && (d == nil || !availableEverywhere(d) || ptrTrue(d.spec.BindsToNode)) {
			out.Status.Allocation.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{s.node.Name}}}}}}
			break
		}
	}
	objs, input := s.c.objs, s.c.input
	if s.before != nil && s.before.objs != nil {
		objs, input = s.before.objs, s.before.input
	}
	sub := &checker{objs: objs, compat: s.c.compat, w: s.c.w, classes: s.c.classes, input: input, fixed: s.c.fixed, inSearch: true, noCapacity: !capacity}
	saved := input[s.nc.key]
	input[s.nc.key] = in
	sub.run([]*resourceapi.ResourceClaim{out})
	input[s.nc.key] = saved
	return len(sub.errs) == 0
}
