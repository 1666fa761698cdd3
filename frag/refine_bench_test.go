package frag_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/model"
)

// BenchmarkRefine is the look-ahead of one controller pass on a large
// cluster: the load test's pool (bench's mig scenario, a quarter of the
// GPUs holding claims), a batch of 150 pending claims placed by best fit,
// then Refine within its own cap (alloc.MaxLookahead). It reports the
// expected fragmentation (GPUs) before and after, and the claims the
// search moved: within the same time, a faster search gets further.
//
//	go test -run '^$' -bench 'Refine/nodes=1000' -benchtime 3x ./frag/
func BenchmarkRefine(b *testing.B) {
	for _, nodes := range []int{200, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			insts, err := bench.Generate("mig", bench.Size{Nodes: nodes, GPUs: 8, Claims: 5 * nodes}, 1, bench.GenerateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			objs := insts[0].Objs
			w := frag.NewWorkload()
			var claims []*resourceapi.ResourceClaim
			pending := 0
			for _, c := range objs.Claims {
				w.Observe(c)
				if c.Status.Allocation == nil {
					if pending++; pending > 150 {
						continue
					}
				}
				claims = append(claims, c)
			}
			objs.Claims = claims
			ctx := context.Background()
			p, err := model.Build(ctx, objs, model.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var before, after float64
			moved := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				m, err := frag.For(ctx, objs, p, w)
				if err != nil {
					b.Fatal(err)
				}
				start := m.Greedy(p.Claims, frag.BestFit)
				before = fragOf(m, p, start)
				b.StartTimer()
				res := m.Refine(ctx, p, start, time.Time{})
				b.StopTimer()
				after = fragOf(m, p, res)
				was := map[*model.Claim]string{}
				for _, a := range start.Assignments {
					was[a.Claim] = fmt.Sprint(a.Picks)
				}
				moved = 0
				for _, a := range res.Assignments {
					if was[a.Claim] != fmt.Sprint(a.Picks) {
						moved++
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(before, "frag-before")
			b.ReportMetric(after, "frag-after")
			b.ReportMetric(float64(moved), "moved")
		})
	}
}

func fragOf(m *frag.Measure, p *model.Problem, res *alloc.Result) float64 {
	f, _ := m.Frag(stateOf(p, res))
	return f
}
