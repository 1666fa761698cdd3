// Package check is an independent feasibility checker for allocation
// results. It re-derives the scheduler's rules directly from the Kubernetes
// objects (ResourceSlices, DeviceClasses, ResourceClaims, Nodes, Pods),
// following k8s.io/dynamic-resource-allocation's structured allocator, and
// shares no code with the engine: it imports only package input (the objects
// as read), so that mistakes in model, encode or alloc get caught.
package check

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Compatibility-group semantics.
const (
	// CompatKEP5963: per counter set, the intersection of the group lists
	// of all devices allocated from it is non-empty; a device without
	// groups counts as the single group "<none>".
	CompatKEP5963 = "kep5963"
	// CompatWildcard: two devices with non-empty lists must share a group;
	// an empty list is compatible with everything.
	CompatWildcard = "wildcard"
)

// Options for Check.
type Options struct {
	// Compat is CompatKEP5963 (default when empty) or CompatWildcard.
	Compat string
	// Memo, when set, keeps between checks what depends on the devices,
	// nodes and classes alone (see Memo); the verdicts are the same.
	Memo *Memo
}

// Check verifies that the newly allocated claims, together with the
// allocations already present in objs.Claims, are feasible. allocated holds
// copies of claims from objs.Claims that had no status.allocation; those with
// status.allocation set are the new allocations (the others must be
// unchanged). It returns every violation found, joined, each naming the claim
// and, where there is one, the device; nil means feasible.
//
// Admin access follows the scheduler: existing admin-access results neither
// occupy devices nor consume counters; new admin-access results may share
// devices in use but, like upstream's allocator, count towards counters and
// compatibility groups. compatibleOnlyWith (not upstream) only considers
// results that occupy their device (non-admin).
func Check(objs *input.Objects, allocated []*resourceapi.ResourceClaim, opts Options) error {
	compat := opts.Compat
	switch compat {
	case "":
		compat = CompatKEP5963
	case CompatKEP5963, CompatWildcard:
	default:
		return fmt.Errorf("compat mode %q: want %s or %s", opts.Compat, CompatKEP5963, CompatWildcard)
	}
	c := &checker{objs: objs, compat: compat, w: newWorld(taintedSlices(objs.Slices, objs.TaintRules), objs.Nodes),
		classes: map[string]*resourceapi.DeviceClass{}, input: map[string]*resourceapi.ResourceClaim{}}
	if opts.Memo != nil {
		if selErr, done := opts.Memo.lend(objs); selErr != nil {
			c.w.selErr = selErr
			defer done()
		}
	}
	for _, cl := range objs.Classes {
		if _, ok := c.classes[cl.Name]; !ok {
			c.classes[cl.Name] = cl
		}
	}
	for _, cl := range objs.Claims {
		if _, ok := c.input[claimKey(cl)]; !ok {
			c.input[claimKey(cl)] = cl
		}
	}
	c.fixed = boundNodes(objs)
	c.run(allocated)
	c.checkPods(allocated)
	return errors.Join(c.errs...)
}

type checker struct {
	objs    *input.Objects
	compat  string
	w       *world
	classes map[string]*resourceapi.DeviceClass
	input   map[string]*resourceapi.ResourceClaim
	fixed   map[string]podNode // claim key -> bound pod's node

	newClaims  []*newClaim
	placements []*placement // existing, then new
	errs       []error
	// inSearch: this checker judges a partial allocation for the search of
	// rule 10, which does not apply to it again.
	inSearch bool
	// noCapacity: the search asks without the capacity rule (checkCapacity).
	noCapacity bool
}

// newClaim is one newly allocated claim.
type newClaim struct {
	key        string
	in, out    *resourceapi.ResourceClaim
	alloc      *resourceapi.AllocationResult
	placements []*placement
	alts       []*alt // results grouped by request, see checkRequests
	// seenBy lists the nodes the claim may have been allocated for as far
	// as pool generations go (see checkClaim); nil: not restricted.
	seenBy []*corev1.Node
}

// placement is one allocation result.
type placement struct {
	claim string
	isNew bool
	res   *resourceapi.DeviceRequestAllocationResult
	admin bool
	dev   *device // nil unless the device is in a usable pool
}

func (p *placement) String() string {
	s := "claim " + p.claim + " device " + keyOf(p.res).String()
	if !p.isNew {
		s = "existing " + s
	}
	if p.admin {
		s += " (admin access)"
	}
	return s
}

func claimKey(c *resourceapi.ResourceClaim) string { return c.Namespace + "/" + c.Name }

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) run(allocated []*resourceapi.ResourceClaim) {
	c.collect(allocated)
	for _, nc := range c.newClaims {
		c.checkClaim(nc)
	}
	c.checkSearchOrders()
	c.checkOccupancy()
	if !c.noCapacity {
		c.checkCapacity()
	}
	c.checkCounters()
	c.checkGroups()
	c.checkCompatibleOnlyWith()
	c.checkDraft()
}

// collect checks rule 9 (claims otherwise unchanged) and rule 1 (devices
// exist in usable pools), and gathers the placements.
func (c *checker) collect(allocated []*resourceapi.ResourceClaim) {
	seen := map[string]bool{}
	isNew := map[string]bool{}
	for _, out := range allocated {
		if out == nil {
			continue
		}
		key := claimKey(out)
		if seen[key] {
			c.errorf("claim %s: listed more than once among the allocated claims", key)
			continue
		}
		seen[key] = true
		in := c.input[key]
		if in == nil {
			c.errorf("claim %s: not among the input claims", key)
			continue
		}
		c.checkUnchanged(key, in, out)
		if in.Status.Allocation != nil {
			if !apiequality.Semantic.DeepEqual(in.Status.Allocation, out.Status.Allocation) {
				c.errorf("claim %s: was already allocated in the input, but its status.allocation was changed", key)
			}
			continue
		}
		if out.Status.Allocation == nil {
			continue
		}
		isNew[key] = true
		nc := &newClaim{key: key, in: in, out: out, alloc: out.Status.Allocation}
		c.newClaims = append(c.newClaims, nc)
	}
	for _, in := range c.objs.Claims {
		key := claimKey(in)
		if in.Status.Allocation == nil || isNew[key] || c.input[key] != in {
			continue
		}
		for i := range in.Status.Allocation.Devices.Results {
			r := &in.Status.Allocation.Devices.Results[i]
			c.placements = append(c.placements, &placement{claim: key, res: r, admin: ptrTrue(r.AdminAccess), dev: c.w.usable(keyOf(r))})
		}
	}
	for _, nc := range c.newClaims {
		if len(nc.alloc.Devices.Results) == 0 {
			c.errorf("claim %s: status.allocation has no device results", nc.key)
		}
		for i := range nc.alloc.Devices.Results {
			r := &nc.alloc.Devices.Results[i]
			p := &placement{claim: nc.key, isNew: true, res: r, admin: ptrTrue(r.AdminAccess)}
			k := keyOf(r)
			switch d := c.w.devices[k]; {
			case d == nil && c.w.pools[poolKey{k.Driver, k.Pool}] == nil:
				c.errorf("claim %s: device %s: pool %s does not exist (not in a usable pool)", nc.key, k, poolKey{k.Driver, k.Pool})
			case d == nil:
				c.errorf("claim %s: device %s: no such device in the generations of its pool that nodes use (not in a usable pool)", nc.key, k)
			case d.pool.issue != "":
				c.errorf("claim %s: device %s: pool %s is not usable: %s", nc.key, k, d.pool.key, d.pool.issue)
			default:
				p.dev = d
			}
			nc.placements = append(nc.placements, p)
			c.placements = append(c.placements, p)
		}
	}
}

// generationOptions: each node uses its own generation of a pool (see
// nodeGeneration), so a claim's devices must all be in the generations of
// one node the claim may have been allocated for (its bound pod's node, or
// one its nodeSelector admits), usable and allocatable there. It returns
// the distinct ways to read the claim's devices so, each with the nodes
// that read them so, in node order; nil where every node uses the same
// generations (nothing to choose). An empty, non-nil list: no node can.
func (c *checker) generationOptions(nc *newClaim) []generationOption {
	multi := false
	for _, p := range nc.placements {
		if p.dev != nil && c.w.multi[p.dev.key.pool()] {
			multi = true
		}
	}
	if !multi || len(c.w.nodes) == 0 {
		return nil
	}
	candidates := c.w.nodes
	if b, ok := c.fixed[nc.key]; ok {
		candidates = nil
		if n := c.w.nodeByName[b.node]; n != nil {
			candidates = []*corev1.Node{n}
		}
	}
	out := []generationOption{}
	for _, n := range candidates {
		if sel := nc.alloc.NodeSelector; sel != nil {
			if ok, _ := c.w.matchNode(sel, n); !ok {
				continue
			}
		}
		var devs []*device
		for _, p := range nc.placements {
			v := c.w.view(n, keyOf(p.res).pool())
			if v == nil || v.issue != "" || c.w.entryOn(v, p.res.Device, n) == nil {
				break
			}
			d := c.w.entryOn(v, p.res.Device, n)
			if ok, _ := c.w.allocatable(d, n); !ok {
				break
			}
			devs = append(devs, d)
		}
		if len(devs) < len(nc.placements) {
			continue
		}
		found := false
		for i := range out {
			if slices.Equal(out[i].devs, devs) {
				out[i].nodes = append(out[i].nodes, n)
				found = true
			}
		}
		if !found {
			out = append(out, generationOption{devs, []*corev1.Node{n}})
		}
	}
	return out
}

// generationOption is one reading of a claim's devices: the generation's
// device per result, and the nodes that use those generations.
type generationOption struct {
	devs  []*device
	nodes []*corev1.Node
}

// checkClaim runs the per-claim rules. Where nodes use different
// generations of the claim's pools, the claim is valid when the rules hold
// for some node it may have been allocated for, read with that node's
// generations; otherwise the first reading's violations are reported.
func (c *checker) checkClaim(nc *newClaim) {
	run := func() {
		c.checkRequests(nc)
		c.checkConstraints(nc)
		c.checkNode(nc)
		c.checkResultFields(nc)
	}
	opts := c.generationOptions(nc)
	if opts == nil {
		run()
		return
	}
	if len(opts) == 0 {
		var names []string
		for _, p := range nc.placements {
			names = append(names, keyOf(p.res).String())
		}
		c.errorf("claim %s: no node the allocation may be for uses a generation of the pools that has all its devices (%s) usable and available there",
			nc.key, strings.Join(names, ", "))
		run()
		return
	}
	var first []error
	for i, o := range opts {
		for j, p := range nc.placements {
			p.dev = o.devs[j]
		}
		nc.seenBy = o.nodes
		before := len(c.errs)
		run()
		if len(c.errs) == before {
			return
		}
		if i == 0 {
			first = append(first, c.errs[before:]...)
		}
		c.errs = c.errs[:before]
	}
	for j, p := range nc.placements {
		p.dev = opts[0].devs[j]
	}
	nc.seenBy = opts[0].nodes
	c.errs = append(c.errs, first...)
}

// checkUnchanged: apart from status.allocation (and apiVersion/kind), the
// allocated claim must equal the input claim.
func (c *checker) checkUnchanged(key string, in, out *resourceapi.ResourceClaim) {
	if !apiequality.Semantic.DeepEqual(in.Spec, out.Spec) {
		c.errorf("claim %s: spec differs from the input claim", key)
	}
	if !apiequality.Semantic.DeepEqual(in.ObjectMeta, out.ObjectMeta) {
		c.errorf("claim %s: metadata differs from the input claim", key)
	}
	inStatus, outStatus := in.Status, out.Status
	inStatus.Allocation, outStatus.Allocation = nil, nil
	if !apiequality.Semantic.DeepEqual(inStatus, outStatus) {
		c.errorf("claim %s: status other than allocation differs from the input claim", key)
	}
}

// podNode records the node of a bound pod using a claim.
type podNode struct{ pod, node string }

// boundNodes maps claims to the node of a bound pod that uses them: through
// the claim's status.reservedFor, or the pod's spec.resourceClaims
// (resourceClaimName) or status.resourceClaimStatuses.
func boundNodes(objs *input.Objects) map[string]podNode {
	out := map[string]podNode{}
	pods := map[string]*corev1.Pod{}
	for _, p := range objs.Pods {
		pods[p.Namespace+"/"+p.Name] = p
	}
	for _, cl := range objs.Claims {
		for _, ref := range cl.Status.ReservedFor {
			if ref.Resource != "pods" || ref.APIGroup != "" {
				continue
			}
			if p := pods[cl.Namespace+"/"+ref.Name]; p != nil && p.Spec.NodeName != "" {
				out[claimKey(cl)] = podNode{p.Namespace + "/" + p.Name, p.Spec.NodeName}
			}
		}
	}
	for _, p := range objs.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		pn := podNode{p.Namespace + "/" + p.Name, p.Spec.NodeName}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				out[p.Namespace+"/"+*rc.ResourceClaimName] = pn
			}
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				out[p.Namespace+"/"+*st.ResourceClaimName] = pn
			}
		}
	}
	return out
}

// checkOccupancy: rule 2. A device serves at most one claim (admin access
// excepted) and appears at most once per claim. A device that allows
// multiple allocations is shared instead: any number of claims, and of
// requests of one claim, may hold shares of it (once per request), unless
// an existing result without shareID holds it.
func (c *checker) checkOccupancy() {
	holders := map[devKey][]*placement{}
	for _, p := range c.placements {
		if !p.admin && !p.isShare() {
			holders[keyOf(p.res)] = append(holders[keyOf(p.res)], p)
		}
	}
	for _, nc := range c.newClaims {
		count := map[string]int{}
		var order []string
		for _, p := range nc.placements {
			k := keyOf(p.res).String()
			if shared(p.dev) {
				k += " for request " + p.res.Request
			}
			if count[k] == 0 {
				order = append(order, k)
			}
			count[k]++
		}
		for _, k := range order {
			if count[k] > 1 {
				c.errorf("claim %s: device %s is allocated %d times within the claim", nc.key, k, count[k])
			}
		}
		reported := map[devKey]bool{}
		for _, p := range nc.placements {
			k := keyOf(p.res)
			if p.admin || reported[k] {
				continue
			}
			reported[k] = true
			var others []string
			for _, h := range holders[k] {
				if h.claim != nc.key {
					others = append(others, h.claim)
				}
			}
			if len(others) > 0 {
				c.errorf("claim %s: device %s is also allocated to claim(s) %s", nc.key, k, strings.Join(unique(others), ", "))
			}
		}
	}
}

func unique(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckAll checks every claim that holds an allocation in objs against all
// the others, as if all were allocated at once: the test of a cluster's
// whole state (no device twice, no counter overdrawn, every rule met).
func CheckAll(objs *input.Objects, opts Options) error {
	pending := *objs
	pending.Claims = nil
	var allocated []*resourceapi.ResourceClaim
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c)
		}
		c = c.DeepCopy()
		c.Status.Allocation = nil
		pending.Claims = append(pending.Claims, c)
	}
	return Check(&pending, allocated, opts)
}
