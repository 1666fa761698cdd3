package k8s

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// BenchmarkPassBuild builds the engine's problem as a controller pass does
// (objects: every slice, every allocated claim, a batch of pending claims)
// on the mig pool of the load test (k8s/e2e/scale_test.go) without a
// cluster, so that a pass at scale can be profiled:
//
//	go test -run '^$' -bench 'PassBuild/nodes=500' -benchtime 3x \
//	  -cpuprofile /tmp/cpu.pprof -memprofile /tmp/mem.pprof ./k8s/
func BenchmarkPassBuild(b *testing.B) {
	for _, nodes := range []int{200, 500, 1000} {
		for _, memo := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/memo=%t", nodes, memo), func(b *testing.B) {
				snap, batch := passInput(b, nodes, 300)
				var opts model.Options
				var memoMB float64
				if memo {
					// The memo as a controller has it after its first pass.
					// memo-MB: the heap it holds (live heap after the
					// first build, without the problem, minus before).
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					opts.Memo = model.NewMemo()
					if _, err := model.Build(context.Background(), objects(snap, batch), opts); err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					memoMB = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 1e6
				}
				b.ResetTimer()
				for range b.N {
					if _, err := model.Build(context.Background(), objects(snap, batch), opts); err != nil {
						b.Fatal(err)
					}
				}
				if memo {
					b.ReportMetric(float64(opts.Memo.Evaluations), "evals")
					b.ReportMetric(float64(opts.Memo.Reused), "reused")
					b.ReportMetric(memoMB, "memo-MB") // after the timer's reset, which clears metrics
				}
			})
		}
	}
}

// passInput is the load test's pool at nodes x 8 GPUs, as a snapshot, and
// its first n pending claims as the batch.
func passInput(b testing.TB, nodes, n int) (*Snapshot, []*resourceapi.ResourceClaim) {
	b.Helper()
	insts, err := bench.Generate("mig", bench.Size{Nodes: nodes, GPUs: 8, Claims: 5 * nodes}, 1, bench.GenerateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	objs := insts[0].Objs
	// As the informers hold them: each slice decoded on its own, its
	// devices' capacity and counter maps shared (share.go), attributes not.
	maps := newDeviceMaps()
	snap := &Snapshot{Classes: objs.Classes, Nodes: objs.Nodes}
	for _, s := range objs.Slices {
		s = s.DeepCopy()
		maps.share(s)
		snap.Slices = append(snap.Slices, s)
	}
	var batch []*resourceapi.ResourceClaim
	for _, c := range objs.Claims {
		switch {
		case c.Status.Allocation != nil:
			snap.Claims = append(snap.Claims, c)
		case len(batch) < n:
			batch = append(batch, c)
		}
	}
	return snap, batch
}

// BenchmarkPassShapes is the build of a pass with the frag look-ahead's
// measure (the controller's default policy), as passes made it before
// (together=false: the batch's build, then frag.For's build of the
// workload's shapes over every slice again) and as they do now
// (together=true: one build with the shapes, split off, frag.BindBuilt).
// The memo is as a controller has it after its first pass; the workload
// is the one a first pass learns (the snapshot's claims).
//
//	go test -run '^$' -bench 'PassShapes/nodes=500' -benchtime 2x -benchmem ./k8s/
func BenchmarkPassShapes(b *testing.B) {
	for _, nodes := range []int{200, 500, 1000} {
		for _, together := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/together=%t", nodes, together), func(b *testing.B) {
				snap, batch := passInput(b, nodes, 300)
				ctx := context.Background()
				opts := model.Options{Memo: model.NewMemo()}
				w := frag.WorkloadFor(objects(snap, batch), nil)
				build := func() *frag.Measure {
					objs := objects(snap, batch)
					if !together {
						p, err := model.Build(ctx, objs, opts)
						if err != nil {
							b.Fatal(err)
						}
						m, err := frag.For(ctx, objs, p, w)
						if err != nil {
							b.Fatal(err)
						}
						return m
					}
					objs.Claims = append(objs.Claims, w.ShapeClaims()...)
					p, shapes, err := buildWithShapes(ctx, objs, opts)
					if err != nil {
						b.Fatal(err)
					}
					return w.BindBuilt(nil, p, shapes)
				}
				build()
				b.ResetTimer()
				for range b.N {
					build()
				}
			})
		}
	}
}

// BenchmarkPassClaimless is a pass's frag builds with pods without claims
// to place (Options.PlacePods): the solve's build with the look-ahead's
// shapes (frag.BindBuilt), then placeClaimless's build of the cluster the
// solve leaves and its measure (frag.For). changed=true: the nodes were
// updated since the last pass (new objects, as from an informer), so no
// shapes built for the last pass's cluster can be used; changed=false:
// nothing changed. shape-builds is frag.Bind's own builds of the shapes a
// pass; allocs/op (-benchmem) counts both builds.
//
//	go test -run '^$' -bench 'PassClaimless/nodes=200' -benchtime 5x -benchmem ./k8s/
func BenchmarkPassClaimless(b *testing.B) {
	for _, nodes := range []int{200, 500} {
		for _, changed := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/changed=%t", nodes, changed), func(b *testing.B) {
				snap, batch := passInput(b, nodes, 150)
				ctx := context.Background()
				opts := model.Options{Memo: model.NewMemo()}
				w := frag.WorkloadFor(objects(snap, batch), nil)
				pass := func() {
					objs := objects(snap, batch)
					objs.Claims = append(objs.Claims, w.ShapeClaims()...)
					p, shapes, err := buildWithShapes(ctx, objs, opts)
					if err != nil {
						b.Fatal(err)
					}
					w.BindBuilt(objs, p, shapes)
					left := objects(snap, nil)
					q, err := model.Build(ctx, left, opts)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := frag.For(ctx, left, q, w); err != nil {
						b.Fatal(err)
					}
				}
				// Two passes before the timer: the memo settles only after
				// the first pass's builds (without the shapes kept, the
				// second pass's builds reuse what the first pass's build of
				// the shapes evaluated).
				pass()
				pass()
				before := w.ShapeBuilds()
				b.ResetTimer()
				for range b.N {
					if changed {
						b.StopTimer()
						nodes := make([]*corev1.Node, len(snap.Nodes))
						for i, n := range snap.Nodes {
							nodes[i] = n.DeepCopy()
						}
						snap.Nodes = nodes
						b.StartTimer()
					}
					pass()
				}
				b.ReportMetric(float64(w.ShapeBuilds()-before)/float64(b.N), "shape-builds")
			})
		}
	}
}

// buildWithShapes builds objs, among whose claims are the look-ahead's
// shape claims, as the pass does (every device a shape matches,
// model.Options.EveryMatch), and splits the shapes off the problem.
func buildWithShapes(ctx context.Context, objs *input.Objects, opts model.Options) (*model.Problem, []*model.Claim, error) {
	opts.EveryMatch = frag.IsShape
	full, err := model.Build(ctx, objs, opts)
	if err != nil {
		return nil, nil, err
	}
	p, shapes := full.Split(func(c *model.Claim) bool { return frag.IsShape(c.Obj) })
	return p, shapes, nil
}
