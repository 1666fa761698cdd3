package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// benchmarkMIG solves one generated mig instance per iteration and reports
// quality next to time: admitted claims, whether the optimum was proven, and
// the gap to the proven bound.
func benchmarkMIG(b *testing.B, nodes, gpus, claims int) {
	var admitted, optimal, gap float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		objs := MIG(DefaultMIG(nodes, gpus, claims, uint64(i+1)))
		b.StartTimer()
		p, err := model.Build(objs, model.Options{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
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

// TestMIGProbe prints one solve per size; a development aid (-run Probe -v).
func TestMIGProbe(t *testing.T) {
	if testing.Short() || !testing.Verbose() {
		t.Skip("development aid: go test -run Probe -v ./bench/")
	}
	for _, sz := range [][3]int{{8, 8, 300}, {8, 8, 500}, {64, 8, 2000}} {
		objs := MIG(DefaultMIG(sz[0], sz[1], sz[2], 1))
		start := time.Now()
		p, err := model.Build(objs, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		build := time.Since(start)
		res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Stats
		fmt.Printf("%v: build %v total %v admitted %d greedy %d bound %d optimal %v vars %d clauses %d comps %d\n",
			sz, build, time.Since(start), st.Admitted, st.Greedy, st.Bound, st.Optimal, st.Variables, st.Clauses, st.Components)
	}
}
