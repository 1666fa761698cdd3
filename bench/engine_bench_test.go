package bench

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// benchmarkMIG solves one generated mig instance per iteration and reports
// quality next to time: admitted claims, whether the optimum was proven, and
// the gap to the proven bound.
func benchmarkMIG(b *testing.B, nodes, gpus, claims int) {
	benchmarkMIGFamily(b, "default", nodes, gpus, claims)
}

// benchmarkMIGFamily is benchmarkMIG on one claim mix (MIGFamilies);
// iteration i solves seed i+1.
func benchmarkMIGFamily(b *testing.B, family string, nodes, gpus, claims int) {
	var admitted, optimal, gap float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, err := gen.MIGFamilyConfig(family, nodes, gpus, claims, uint64(i+1))
		if err != nil {
			b.Fatal(err)
		}
		objs := gen.MIG(cfg)
		b.StartTimer()
		// The 10 s budget includes building the model, as in drasat
		// allocate --timeout 10s.
		start := time.Now()
		p, err := model.Build(context.Background(), objs, model.Options{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: alloc.TimeLeft(10*time.Second, start)})
		if err != nil {
			b.Fatal(err)
		}
		admitted += float64(res.Stats.Admitted)
		if res.Stats.Optimal {
			optimal++
		}
		gap += res.Stats.Gap()
	}
	n := float64(b.N)
	b.ReportMetric(admitted/n, "admitted")
	b.ReportMetric(optimal/n, "proven")
	b.ReportMetric(100*gap/n, "gap%")
}

func BenchmarkMIG8x8Claims300(b *testing.B)   { benchmarkMIG(b, 8, 8, 300) }
func BenchmarkMIG8x8Claims500(b *testing.B)   { benchmarkMIG(b, 8, 8, 500) }
func BenchmarkMIG64x8Claims2000(b *testing.B) { benchmarkMIG(b, 64, 8, 2000) }

func BenchmarkMIG256x8Claims8000(b *testing.B) { benchmarkMIG(b, 256, 8, 8000) }

// BenchmarkMIGFamilies runs every claim mix at the target sizes:
// go test ./bench -run '^$' -bench 'MIGFamilies/independent' -benchtime 5x
func BenchmarkMIGFamilies(b *testing.B) {
	sizes := []Size{{4, 8, 150}, {8, 8, 300}, {8, 8, 500}, {16, 8, 1000}, {64, 8, 2000}}
	for _, fam := range gen.MIGFamilies {
		for _, sz := range sizes {
			b.Run(fam+"/"+sz.String(), func(b *testing.B) { benchmarkMIGFamily(b, fam, sz.Nodes, sz.GPUs, sz.Claims) })
		}
	}
}

// benchmarkBuild measures turning objects into the problem: pools,
// counters and CEL selection of candidates.
func benchmarkBuild(b *testing.B, nodes, gpus, claims int) {
	objs := gen.MIG(gen.DefaultMIG(nodes, gpus, claims, 1))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := model.Build(context.Background(), objs, model.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildMIG8x8Claims500(b *testing.B)   { benchmarkBuild(b, 8, 8, 500) }
func BenchmarkBuildMIG64x8Claims2000(b *testing.B) { benchmarkBuild(b, 64, 8, 2000) }

// benchmarkRelaxation measures the configuration relaxation alone: bins,
// types, and the descent to its bound.
func benchmarkRelaxation(b *testing.B, nodes, gpus, claims int) {
	p, err := model.Build(context.Background(), gen.MIG(gen.DefaultMIG(nodes, gpus, claims, 1)), model.Options{})
	if err != nil {
		b.Fatal(err)
	}
	unit := func(*model.Claim) int64 { return 1 }
	b.ResetTimer()
	var value float64
	for i := 0; i < b.N; i++ {
		rel, err := bound.New(context.Background(), p, p.Claims, unit)
		if err != nil {
			b.Fatal(err)
		}
		value = rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{}).Value
	}
	b.ReportMetric(value, "bound")
}

func BenchmarkRelaxationMIG8x8Claims500(b *testing.B)   { benchmarkRelaxation(b, 8, 8, 500) }
func BenchmarkRelaxationMIG64x8Claims2000(b *testing.B) { benchmarkRelaxation(b, 64, 8, 2000) }
