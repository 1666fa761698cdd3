package scalegen

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// BenchmarkScale solves generated clusters of 8 A100s per node within a
// 10 s budget that includes building the problem, as drasat allocate
// --timeout 10s does; the objects are read back from their YAML first,
// untimed (reading alone: model's BenchmarkLoadScale). It
// reports the answer next to first-fit in arrival order, the proven bound,
// when the first feasible answer (the greedy stage) was in hand, and the
// process's peak RSS so far (run one size per process to read it per size):
//
//	go test -run '^$' -bench 'Scale/1000x8' -benchtime 1x -timeout 30m ./tools/scalegen/
func BenchmarkScale(b *testing.B) {
	for _, sz := range []struct{ nodes, claims int }{{128, 4000}, {256, 8000}, {512, 16000}, {1000, 30000}} {
		b.Run(fmt.Sprintf("%dx8", sz.nodes), func(b *testing.B) {
			var admitted, bound, ff, first float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// Through YAML, as drasat allocate -f reads it (slices
				// read from files share their identical maps).
				var buf bytes.Buffer
				if err := WriteYAML(&buf, Generate(Config{Nodes: sz.nodes, GPUs: 8, Claims: sz.claims, Seed: uint64(i + 1)})); err != nil {
					b.Fatal(err)
				}
				objs, _, err := input.Load([]string{"-"}, &buf)
				if err != nil {
					b.Fatal(err)
				}
				buf = bytes.Buffer{}
				b.StartTimer()
				start := time.Now()
				p, err := model.Build(context.Background(), objs, model.Options{})
				if err != nil {
					b.Fatal(err)
				}
				built := time.Since(start)
				res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: alloc.TimeLeft(10*time.Second, start)})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				admitted += float64(res.Stats.Admitted)
				bound += float64(res.Stats.Bound)
				// The first feasible answer: the build, then the stages
				// up to the greedy one (one component here).
				first += built.Seconds()
				for _, st := range res.Stats.Stages {
					first += st.Time.Seconds()
					if st.Stage == "greedy" {
						break
					}
				}
				ff += float64(len(baseline.FirstFit(p, p.Claims).Assignments))
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(admitted/n, "admitted")
			b.ReportMetric(ff/n, "first-fit")
			b.ReportMetric(bound/n, "bound")
			b.ReportMetric(100*(bound-admitted)/max(bound, 1), "gap%")
			b.ReportMetric(first/n, "first-feasible-s")
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// peakRSSMiB is the process's peak resident set so far.
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}
