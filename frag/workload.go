// Package frag measures how fragmented a cluster is for the workload to come
// and places claims so that it grows least. It implements the measure of
// Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
// USENIX ATC'23) over drasat's model, where a GPU is a counter set and a
// task shape is a kind of claim: bench's FGD baseline and the engine's frag
// policy share it.
package frag

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Workload is the distribution of task shapes: how often each kind of
// task (identical spec.devices of its claim, and identical requests of its
// pod when they are known) has been seen. It is learnt from claims as they
// arrive (bench: the trace's past; the controller: the claims it
// allocated).
type Workload struct {
	keys   []string
	claims []*resourceapi.ResourceClaim // one representative per shape; nil: a task without devices
	reqs   []corev1.ResourceList        // the pod's requests per shape (nil: not known)
	counts []float64
	index  map[string]int
	// specs is each shape's claim spec (spec.devices as JSON; "" for a
	// task without devices): shapes differing only in their pod share it.
	specs []string
	// bound keeps the claim specs built against the last cluster (Bind,
	// BindBuilt).
	mu    sync.Mutex
	bound *boundSpecs
	// resolved keeps the bound specs resolved against the last problem
	// layout (resolved.go).
	resolved *resolvedCache
	// shapeBuilds counts Bind's builds of shapes (ShapeBuilds).
	shapeBuilds int
	// Top, when above 0, keeps only the most frequent shapes that together
	// make up Top % of the tasks, their frequencies renormalised (FGD's
	// target workload: 95 in the paper). Ties keep the shape seen first.
	Top float64
}

// NewWorkload is an empty workload.
func NewWorkload() *Workload { return &Workload{index: map[string]int{}} }

// Observe counts one claim of the workload.
func (w *Workload) Observe(c *resourceapi.ResourceClaim) { w.ObserveTask(c, nil) }

// ObserveTask counts one task: its claim (nil for a task that uses no
// devices) and what its pod requests of the node (nil: not known).
func (w *Workload) ObserveTask(c *resourceapi.ResourceClaim, requests corev1.ResourceList) {
	var b strings.Builder
	if c != nil {
		js, _ := json.Marshal(c.Spec.Devices)
		b.Write(js)
	}
	spec := b.String()
	names := make([]string, 0, len(requests))
	for n := range requests {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		q := requests[corev1.ResourceName(n)]
		fmt.Fprintf(&b, "|%s=%s", n, q.String())
	}
	k := b.String()
	i, ok := w.index[k]
	if !ok {
		i = len(w.keys)
		w.index[k] = i
		w.keys = append(w.keys, k)
		w.claims = append(w.claims, c)
		w.reqs = append(w.reqs, requests)
		w.specs = append(w.specs, spec)
		w.counts = append(w.counts, 0)
	}
	w.counts[i]++
}

// Shapes is the number of distinct shapes seen.
func (w *Workload) Shapes() int {
	if w == nil {
		return 0
	}
	return len(w.keys)
}

// Total is the number of claims seen.
func (w *Workload) Total() float64 {
	t := 0.0
	if w != nil {
		for _, c := range w.counts {
			t += c
		}
	}
	return t
}

// target is the shapes the measure weighs (all, or the top ones by
// Top) and the total count they share.
func (w *Workload) target() ([]int, float64) {
	idx := make([]int, len(w.keys))
	for i := range idx {
		idx[i] = i
	}
	if w.Top <= 0 {
		return idx, w.Total()
	}
	sort.SliceStable(idx, func(a, b int) bool { return w.counts[idx[a]] > w.counts[idx[b]] })
	total, cum := w.Total(), 0.0
	for k, i := range idx {
		if cum >= w.Top*total/100 {
			idx = idx[:k]
			break
		}
		cum += w.counts[i]
	}
	sort.Ints(idx)
	return idx, cum
}

// shape is one task shape bound to a problem's devices.
type shape struct {
	w float64 // frequency, the weights sum to 1
	// resolved: its claim spec's candidates on the problem's devices
	// (resolved.go), shared by the shapes of one spec and kept between
	// problems of the same devices; zero for a task without devices.
	resolved
	// req is what the shape's pod asks of a node, per Problem.Resources.
	req []nodeReq
	// podReq is what the shape's pod asks of a node by resource name,
	// known or not to the problem (pods.go: placing pods without claims).
	podReq map[corev1.ResourceName]int64
	// whole: the coverage-only shape of a task taking a whole node of the
	// largest size (cover.go).
	whole bool
}

// nodeReq is an amount of resource j (Problem.Resources) of a node.
type nodeReq struct {
	j int
	v int64
}

// Bind resolves the workload's shapes against the devices of objs (only
// slices and classes are read) and returns the measure for problem p, whose
// devices are matched by ID. Shapes that are not one request for Count
// devices (firstAvailable, allocationMode All, constraints) are measured by
// their first alternative. A shape's pod requests count for the resources
// p knows (those its pending pods request).
func (w *Workload) Bind(ctx context.Context, objs *input.Objects, p *model.Problem) (*Measure, error) {
	if w.Shapes() == 0 {
		return newMeasure(p), nil
	}
	all := make([]int, len(w.keys))
	for i := range all {
		all[i] = i
	}
	byShape, err := w.boundShapes(ctx, objs, p.Options, all)
	if err != nil {
		return nil, err
	}
	return w.bind(p, byShape), nil
}

// ShapeClaims are the claims the measure resolves the workload's shapes
// with, one per claim spec among the shapes seen (the ones it weighs, and
// the others for which GPUs tasks are held to; IsShape tells them from
// others): a caller that builds its problem anyway adds them to its
// objects, so the devices are built once (BindBuilt), not again by Bind.
func (w *Workload) ShapeClaims() []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	seen := map[string]bool{}
	for i := range w.keys {
		if w.claims[i] == nil || seen[w.specs[i]] {
			continue
		}
		seen[w.specs[i]] = true
		out = append(out, w.shapeClaim(i))
	}
	return out
}

// shapeClaim is shape i's claim as ShapeClaims and Bind build it.
func (w *Workload) shapeClaim(i int) *resourceapi.ResourceClaim {
	cc := w.claims[i].DeepCopy()
	cc.Namespace, cc.Name = shapeNamespace, fmt.Sprintf("%s%d", shapePrefix, i)
	cc.UID = ""
	cc.Status = resourceapi.ResourceClaimStatus{}
	return cc
}

// ShapeClaims' claims are named shapePrefix and the shape's number: not a
// valid object name, so no claim of a cluster's is taken for one.
const (
	shapeNamespace = "drasat-frag"
	shapePrefix    = "frag-shape:"
)

// IsShape tells whether c is one of ShapeClaims' claims.
func IsShape(c *resourceapi.ResourceClaim) bool {
	return c != nil && strings.HasPrefix(c.Name, shapePrefix)
}

// BindBuilt is Bind for a problem built with ShapeClaims among its claims:
// shapes are the built claims of ShapeClaims' claims, whose candidates
// are p's devices (p is that build without them). The measure is the one
// Bind gives (TestShapesBuiltWithBatchAsFor in k8s). With objs, the
// cluster p was built from, the shapes are kept as Bind keeps its own: a
// later Bind on the same cluster (the controller's placement of pods
// without claims, after the claims' solve) uses them instead of building
// them again. objs is nil when the build may have been cut short by its
// deadline. p built with model.Options.EveryMatch picking the shapes
// gives their candidates whatever runs; without it, a GPU running claims
// hold is no candidate and the measure has no scarcity term (scarce.go).
func (w *Workload) BindBuilt(objs *input.Objects, p *model.Problem, shapes []*model.Claim) *Measure {
	if w.Shapes() == 0 {
		return newMeasure(p)
	}
	built := map[string]builtSpec{}
	for _, c := range shapes {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(c.Obj.Name, shapePrefix), "%d", &i); err == nil && IsShape(c.Obj) && i >= 0 && i < len(w.specs) {
			// Built with every device it matches (model.Options.EveryMatch),
			// its candidates say which GPUs it is held to (scarce.go).
			static := p.Options.EveryMatch != nil && p.Options.EveryMatch(c.Obj)
			built[w.specs[i]] = builtSpec{c: c, devices: p.Devices, static: static}
		}
	}
	if objs != nil {
		w.mu.Lock()
		b := w.boundFor(objs, p.Options)
		maps.Copy(b.specs, built)
		w.bound = b
		w.mu.Unlock()
	}
	byShape := map[int]builtSpec{}
	for i := range w.keys {
		if s, ok := built[w.specs[i]]; ok && w.claims[i] != nil {
			byShape[i] = s
		}
	}
	return w.bind(p, byShape)
}

// sameDevices tells whether devs is p's device list (a spec built with p).
func sameDevices(devs []*model.Device, p *model.Problem) bool {
	return len(devs) == len(p.Devices) && (len(devs) == 0 || &devs[0] == &p.Devices[0])
}

// bind makes p's measure from the shapes' claims as built, by shape.
//
// Which GPUs a shape is held to (scarce.go) is read from its candidates
// only when every shape was built with every device it matches (Bind's
// own builds, as if nothing ran; BindBuilt's with
// model.Options.EveryMatch): otherwise a GPU whose devices running claims
// hold is no candidate, and sets read there would be held by what runs,
// not by what the shapes ask. The held sets are read from every shape
// given (byShape), the measure weighs the target shapes alone: a task held
// to a GPU model is a rare shape, mostly outside FGD's top 95 %, and the
// held demand is what all of them ask together.
func (w *Workload) bind(p *model.Problem, byShape map[int]builtSpec) *Measure {
	m := newMeasure(p)
	keep, total := w.target()
	static := true
	// A shape built in another problem is matched to p's devices by ID.
	var byID map[input.DeviceID]int
	devOf := func(devs []*model.Device, qd int) (int, bool) {
		if sameDevices(devs, p) {
			return qd, true
		}
		if byID == nil {
			byID = make(map[input.DeviceID]int, len(p.Devices))
			for _, d := range p.Devices {
				byID[d.ID] = d.Index
			}
		}
		d, ok := byID[devs[qd].ID]
		return d, ok
	}
	var lay *layout // p's, made at the first shape with a claim
	used := map[*model.Claim]*resolved{}
	usedBuilt := map[layout]*resolved{}
	// The measure weighs the target shapes (keep); which GPUs tasks are
	// held to is read from every shape built (scarce.go): the tasks
	// held to a model are rare shapes each, mostly outside FGD's top 95 %.
	kept := make([]bool, len(w.keys))
	for _, i := range keep {
		kept[i] = true
	}
	hs := make([]heldShape, len(w.keys))
	for i := range w.keys {
		sh := &shape{w: w.counts[i] / total}
		for r, v := range w.reqs[i] {
			if x := model.ResourceAmount(r, v); x > 0 {
				if sh.podReq == nil {
					sh.podReq = map[corev1.ResourceName]int64{}
				}
				sh.podReq[r] = x
			}
		}
		for j, r := range p.Resources {
			if v, ok := w.reqs[i][r]; ok {
				if x := model.ResourceAmount(r, v); x > 0 {
					sh.req = append(sh.req, nodeReq{j, x})
					if kept[i] {
						m.nodeRes = true
					}
				}
			}
		}
		if w.claims[i] == nil {
			if kept[i] {
				m.shapes = append(m.shapes, sh)
			}
			continue
		}
		bs, ok := byShape[i]
		c := bs.c
		if !ok || c == nil || c.Err != nil || len(c.Requests) == 0 || len(c.Requests[0].Alternatives) == 0 {
			continue
		}
		if kept[i] {
			static = static && bs.static
		} else if !bs.static {
			continue
		}
		if lay == nil {
			l := layoutOf(p)
			lay = &l
		}
		var digest *layout
		if sameDevices(bs.devices, p) {
			d := m.builtDigest(bs) // built with p: the next pass's build may match it
			digest = &d
		}
		r := w.resolvedFor(*lay, bs, digest)
		if r == nil {
			r = m.resolve(bs, devOf)
		}
		used[bs.c] = r
		if digest != nil {
			usedBuilt[*digest] = r
		}
		sh.resolved = *r // its maps shared, read-only
		hs[i].demand = w.counts[i] * float64(sh.count) * r.share
		hs[i].units, hs[i].sh = r.units, sh
		if kept[i] {
			m.shapes = append(m.shapes, sh)
		}
	}
	if lay != nil {
		w.keepResolved(*lay, used, usedBuilt)
	}
	if static {
		m.scarce, m.scarceUnits = heldTo(hs)
		if len(m.scarce) > 0 {
			m.heldRequests(hs)
		}
	}
	sort.SliceStable(m.shapes, func(a, b int) bool { return m.shapes[a].w > m.shapes[b].w })
	if sh := m.wholeNodeShape(); sh != nil {
		m.shapes = append(m.shapes, sh)
	}
	return m
}

// For is the frag policy's measure for problem p: against w when it has
// seen claims, else against the claims of objs (allocated and pending), the
// only workload known then.
func For(ctx context.Context, objs *input.Objects, p *model.Problem, w *Workload) (*Measure, error) {
	return WorkloadFor(objs, w).Bind(ctx, objs, p)
}

// WorkloadFor is the workload For measures against: w when it has seen
// claims, else the claims of objs.
func WorkloadFor(objs *input.Objects, w *Workload) *Workload {
	if w.Shapes() > 0 {
		return w
	}
	w = NewWorkload()
	for _, c := range objs.Claims {
		w.Observe(c)
	}
	return w
}

// boundSpecs is the workload's claim specs built against one cluster's
// devices: by Bind (a problem of one claim per spec, as if nothing were
// allocated) or by the caller's build (BindBuilt: with
// model.Options.EveryMatch, every device a spec matches; without, its
// candidates leave out GPUs whose devices running claims hold). A built spec is a function of
// the cluster's slices, classes, nodes, taint rules and extensions, the
// build's options and the spec alone, so it is kept while those objects are
// the same (objects are never changed in place: an update is a new object,
// as from an informer) and dropped, every spec, when one of them changes.
// Specs seen since are built when a measure first weighs one of them.
type boundSpecs struct {
	objs  input.Objects // the cluster: Claims and Pods are nil
	opts  model.Options
	specs map[string]builtSpec
}

// builtSpec is a claim spec built: its claim and the devices of the
// problem it was built in, which its candidates index.
type builtSpec struct {
	c       *model.Claim
	devices []*model.Device
	// static: built without the cluster's claims (Bind), so its
	// candidates do not depend on what runs.
	static bool
}

// sameCluster tells whether objs is the cluster b was built for.
func (b *boundSpecs) sameCluster(objs *input.Objects, opts model.Options) bool {
	o := &b.objs
	return b.opts.Compat == opts.Compat && b.opts.CELCost == opts.CELCost &&
		slices.Equal(o.Slices, objs.Slices) && slices.Equal(o.Classes, objs.Classes) && slices.Equal(o.Nodes, objs.Nodes) &&
		slices.Equal(o.TaintRules, objs.TaintRules) && slices.Equal(o.Draft, objs.Draft) &&
		maps.Equal(o.CompatibleOnlyWith, objs.CompatibleOnlyWith) && maps.Equal(o.Origin, objs.Origin)
}

// boundFor is the kept specs when they were built for objs' cluster, else
// a new empty set for it (w.mu held).
func (w *Workload) boundFor(objs *input.Objects, opts model.Options) *boundSpecs {
	if b := w.bound; b != nil && b.sameCluster(objs, opts) {
		return b
	}
	b := &boundSpecs{objs: *objs, opts: opts, specs: map[string]builtSpec{}}
	b.objs.Claims, b.objs.Pods = nil, nil
	// The caller's lists and maps may change after this call.
	b.objs.Slices, b.objs.Classes, b.objs.Nodes = slices.Clone(objs.Slices), slices.Clone(objs.Classes), slices.Clone(objs.Nodes)
	b.objs.TaintRules, b.objs.Draft = slices.Clone(objs.TaintRules), slices.Clone(objs.Draft)
	b.objs.CompatibleOnlyWith, b.objs.Origin = maps.Clone(objs.CompatibleOnlyWith), maps.Clone(objs.Origin)
	return b
}

// boundShapes returns, for each shape in keep with a claim, its claim as
// built on objs' cluster: kept, or built now with every other spec seen
// so far and not built there yet.
func (w *Workload) boundShapes(ctx context.Context, objs *input.Objects, opts model.Options, keep []int) (map[int]builtSpec, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.boundFor(objs, opts)
	missing := false
	for _, i := range keep {
		if w.claims[i] != nil {
			if _, ok := b.specs[w.specs[i]]; !ok {
				missing = true
			}
		}
	}
	specs := b.specs
	if missing {
		o := b.objs
		names := map[string]string{} // claim name -> spec
		queued := map[string]bool{}
		for i, c := range w.claims {
			if c == nil || queued[w.specs[i]] {
				continue
			}
			if _, ok := b.specs[w.specs[i]]; ok {
				continue
			}
			// A spec's claim is named after the first shape with it.
			queued[w.specs[i]] = true
			cc := w.shapeClaim(i)
			names[cc.Name] = w.specs[i]
			o.Claims = append(o.Claims, cc)
		}
		w.shapeBuilds++
		q, err := model.Build(ctx, &o, opts)
		if err != nil {
			return nil, fmt.Errorf("frag: workload shapes: %w", err)
		}
		specs = maps.Clone(b.specs)
		for _, c := range q.Claims {
			if spec, ok := names[c.Obj.Name]; ok {
				specs[spec] = builtSpec{c: c, devices: q.Devices, static: true}
			}
		}
		// A build cut short by its deadline may have failed some specs:
		// they are not kept.
		if ctx.Err() == nil {
			b.specs = specs
			w.bound = b
		}
	}
	byShape := map[int]builtSpec{}
	for _, i := range keep {
		if w.claims[i] == nil {
			continue
		}
		if s, ok := specs[w.specs[i]]; ok {
			byShape[i] = s
		}
	}
	return byShape, nil
}

// ShapeBuilds is how many builds of shapes Bind has made: the controller
// builds them with its claims instead (BindBuilt), once a pass.
func (w *Workload) ShapeBuilds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shapeBuilds
}
