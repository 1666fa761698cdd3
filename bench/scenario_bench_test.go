package bench

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Benchmarks of the baselines and of drasat on the tpu and modes scenarios
// and the upstream pathological case; each reports admitted claims next to
// the time, so benchstat tracks quality too.

func benchDrasat(b *testing.B, objs *input.Objects, compat string) {
	b.Helper()
	var admitted float64
	for i := 0; i < b.N; i++ {
		p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
		if err != nil {
			b.Fatal(err)
		}
		res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		admitted += float64(res.Stats.Admitted)
	}
	b.ReportMetric(admitted/float64(b.N), "admitted")
}

func benchFirstFit(b *testing.B, objs *input.Objects, decreasing bool) {
	b.Helper()
	var admitted float64
	for i := 0; i < b.N; i++ {
		p, err := model.Build(context.Background(), objs, model.Options{})
		if err != nil {
			b.Fatal(err)
		}
		order := p.Claims
		if decreasing {
			order = baseline.Decreasing(p)
		}
		admitted += float64(baseline.FirstFit(p, order).Stats.Admitted)
	}
	b.ReportMetric(admitted/float64(b.N), "admitted")
}

func benchUpstream(b *testing.B, objs *input.Objects) {
	b.Helper()
	var admitted float64
	for i := 0; i < b.N; i++ {
		res, err := baseline.Upstream(context.Background(), objs, baseline.UpstreamFeaturesFor(objs))
		if err != nil {
			b.Fatal(err)
		}
		admitted += float64(res.Admitted())
	}
	b.ReportMetric(admitted/float64(b.N), "admitted")
}

func tpuObjs(b *testing.B, nodes, claims int) *input.Objects {
	objs, err := gen.TPU(gen.TPUConfig{Nodes: nodes, Claims: claims, Seed: 1, Fragmented: 0.15})
	if err != nil {
		b.Fatal(err)
	}
	return objs
}

func BenchmarkTPU64Drasat(b *testing.B)   { benchDrasat(b, tpuObjs(b, 64, 40), "") }
func BenchmarkTPU64FirstFit(b *testing.B) { benchFirstFit(b, tpuObjs(b, 64, 40), false) }
func BenchmarkTPU64Upstream(b *testing.B) { benchUpstream(b, tpuObjs(b, 64, 40)) }

func modesObjs() *input.Objects {
	return gen.Modes(gen.ModesConfig{Nodes: 8, GPUsPerNode: 4, Claims: 160, Seed: 1})
}

func BenchmarkModes8x4KEP5963Drasat(b *testing.B)  { benchDrasat(b, modesObjs(), model.CompatKEP5963) }
func BenchmarkModes8x4WildcardDrasat(b *testing.B) { benchDrasat(b, modesObjs(), model.CompatWildcard) }
func BenchmarkModes8x4FirstFit(b *testing.B)       { benchFirstFit(b, modesObjs(), false) }

func BenchmarkMIG8x8Claims500FirstFit(b *testing.B) {
	benchFirstFit(b, gen.MIG(gen.DefaultMIG(8, 8, 500, 1)), false)
}

func BenchmarkMIG8x8Claims500FirstFitDecreasing(b *testing.B) {
	benchFirstFit(b, gen.MIG(gen.DefaultMIG(8, 8, 500, 1)), true)
}

func BenchmarkMIG2x8Claims100Upstream(b *testing.B) {
	benchUpstream(b, gen.MIG(gen.DefaultMIG(2, 8, 100, 1)))
}

// pathologicalObjs: one request for k of n identical devices plus a request
// nothing matches, then a claim that fits (upstream needs 0.22 s
// at n=32, k=4 and times out at n=32, k=8).
func pathologicalObjs(n, k int) *input.Objects {
	c := upClaim("patho", upExact("a", int64(k), upModelSel("x")), upExact("b", 1, upModelSel("y")))
	ok := upClaim("ok", upExact("r", 1, nil))
	return &input.Objects{Slices: upIdentical(n), Classes: []*resourceapi.DeviceClass{upClass()},
		Claims: []*resourceapi.ResourceClaim{c, ok}}
}

func BenchmarkPathologicalN32K8Drasat(b *testing.B) { benchDrasat(b, pathologicalObjs(32, 8), "") }
func BenchmarkPathologicalN32K8FirstFit(b *testing.B) {
	benchFirstFit(b, pathologicalObjs(32, 8), false)
}
func BenchmarkPathologicalN32K4Upstream(b *testing.B) { benchUpstream(b, pathologicalObjs(32, 4)) }
