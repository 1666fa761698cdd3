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
	"sort"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Workload is the distribution of task shapes: how often each kind of claim
// (identical spec.devices) has been seen. It is learnt from claims as they
// arrive (bench: the trace's past; the controller: the claims it allocated).
type Workload struct {
	keys   []string
	claims []*resourceapi.ResourceClaim // one representative per shape
	counts []float64
	index  map[string]int
}

// NewWorkload is an empty workload.
func NewWorkload() *Workload { return &Workload{index: map[string]int{}} }

// Observe counts one claim of the workload.
func (w *Workload) Observe(c *resourceapi.ResourceClaim) {
	js, _ := json.Marshal(c.Spec.Devices)
	k := string(js)
	i, ok := w.index[k]
	if !ok {
		i = len(w.keys)
		w.index[k] = i
		w.keys = append(w.keys, k)
		w.claims = append(w.claims, c)
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

// shape is one task shape bound to a problem's devices.
type shape struct {
	w     float64 // frequency, the weights sum to 1
	count int     // devices the shape asks for
	// bySet lists, per counter set, the shape's candidate devices that
	// consume from it.
	bySet map[int][]int
	// noSet lists candidates that consume no counters, per node.
	any bool // some candidate exists
	// nodes on which the shape has candidates.
	onNode map[int]bool
	// whole: the coverage-only shape of a task taking a whole node of the
	// largest size (cover.go).
	whole bool
}

// Bind resolves the workload's shapes against the devices of objs (only
// slices and classes are read) and returns the measure for problem p, whose
// devices are matched by ID. Shapes that are not one request for Count
// devices (firstAvailable, allocationMode All, constraints) are measured by
// their first alternative.
func (w *Workload) Bind(ctx context.Context, objs *input.Objects, p *model.Problem) (*Measure, error) {
	m := newMeasure(p)
	if w.Shapes() == 0 {
		return m, nil
	}
	o := *objs
	o.Claims = nil
	o.Pods = nil
	for i, c := range w.claims {
		cc := c.DeepCopy()
		cc.Namespace, cc.Name = "drasat-frag", fmt.Sprintf("shape-%d", i)
		cc.Status = resourceapi.ResourceClaimStatus{}
		o.Claims = append(o.Claims, cc)
	}
	q, err := model.Build(ctx, &o, p.Options)
	if err != nil {
		return nil, fmt.Errorf("frag: workload shapes: %w", err)
	}
	byID := make(map[input.DeviceID]int, len(p.Devices))
	for _, d := range p.Devices {
		byID[d.ID] = d.Index
	}
	total := w.Total()
	for i, c := range q.Claims {
		if c.Err != nil || len(c.Requests) == 0 || len(c.Requests[0].Alternatives) == 0 {
			continue
		}
		a := c.Requests[0].Alternatives[0]
		sh := &shape{w: w.counts[i] / total, count: max(a.Count, 1), bySet: map[int][]int{}, onNode: map[int]bool{}}
		for _, qd := range a.Candidates {
			d, ok := byID[q.Devices[qd].ID]
			if !ok {
				continue
			}
			sh.any = true
			dev := p.Devices[d]
			for _, cons := range dev.Consumes {
				sh.bySet[cons.Set] = append(sh.bySet[cons.Set], d)
			}
			if dev.All {
				sh.onNode[-1] = true
			}
			for _, n := range dev.Reach {
				sh.onNode[n] = true
			}
		}
		m.shapes = append(m.shapes, sh)
	}
	sort.SliceStable(m.shapes, func(a, b int) bool { return m.shapes[a].w > m.shapes[b].w })
	if sh := m.wholeNodeShape(); sh != nil {
		m.shapes = append(m.shapes, sh)
	}
	return m, nil
}

// For is the frag policy's measure for problem p: against w when it has
// seen claims, else against the claims of objs (allocated and pending), the
// only workload known then.
func For(ctx context.Context, objs *input.Objects, p *model.Problem, w *Workload) (*Measure, error) {
	if w.Shapes() == 0 {
		w = NewWorkload()
		for _, c := range objs.Claims {
			w.Observe(c)
		}
	}
	return w.Bind(ctx, objs, p)
}
