package input_test

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/tools/scalegen"
)

// BenchmarkLoadScale reads a generated A100 MIG cluster's YAML (package
// scalegen: nodes, the driver's slices, running and pending claims) from
// memory, as drasat allocate -f does from a file. cpu-s/op is the
// process's CPU time (all cores) per load: on a shared machine it moves
// less than the wall time.
//
//	go test -run '^$' -bench 'LoadScale/128' -benchtime 3x ./input/
func BenchmarkLoadScale(b *testing.B) {
	for _, sz := range []struct{ nodes, claims int }{{128, 4000}, {512, 16000}, {1000, 30000}} {
		b.Run(fmt.Sprintf("%dx8", sz.nodes), func(b *testing.B) {
			var buf bytes.Buffer
			if err := scalegen.WriteYAML(&buf, scalegen.Generate(scalegen.Config{Nodes: sz.nodes, GPUs: 8, Claims: sz.claims, Seed: 1})); err != nil {
				b.Fatal(err)
			}
			in := buf.Bytes()
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				objs, _, err := input.Load([]string{"-"}, bytes.NewReader(in))
				if err != nil {
					b.Fatal(err)
				}
				if len(objs.Nodes) != sz.nodes {
					b.Fatalf("%d nodes read, want %d", len(objs.Nodes), sz.nodes)
				}
			}
			b.StopTimer()
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
