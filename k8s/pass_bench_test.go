package k8s

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPass runs the solve of a controller pass as the controller does
// (solveAndWrite with the controller's defaults: --policy frag, --hold,
// --timeout 10s; a dry run, so nothing is written) on the load test's
// pool, the pool of BenchmarkPassBuild, with the first 150 pending claims
// as the batch, arrived over the last 15 s. One pass runs before the timer,
// so the model's memo and the hold's forecast are as a controller has them
// after its first pass. A pass's time after the build (the hold's
// scenarios, the look-ahead, the solve, the reasons) is what this adds to
// BenchmarkPassBuild:
//
//	go test -run '^$' -bench 'Pass/nodes=500' -benchtime 2x \
//	  -cpuprofile /tmp/cpu.pprof -memprofile /tmp/mem.pprof ./k8s/
func BenchmarkPass(b *testing.B) {
	for _, nodes := range []int{200, 500, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap, batch := passInput(b, nodes, 150)
			start := time.Now()
			for i, c := range batch {
				c.CreationTimestamp = metav1.NewTime(start.Add(-time.Duration(len(batch)-i) * 100 * time.Millisecond))
			}
			opts := Options{DryRun: true, Hold: DefaultHold}
			opts.Defaults()
			r := &Reconciler{Opts: opts, Log: zap.NewNop(), Metrics: NewMetrics(), DryRunOut: io.Discard,
				fair: newFairness(), reported: map[string]string{}}
			pass := func() PassResult {
				var res PassResult
				r.plan, r.reported = nil, map[string]string{}
				r.fair.observe(snap)
				dem := projectDemand(snap, "")
				if err := r.solveAndWrite(context.Background(), snap, batch, nil, dem, map[string]*resourceapi.ResourceClaim{}, &res); err != nil {
					b.Fatal(err)
				}
				return res
			}
			// The heap a controller holds between passes: the snapshot's
			// objects (the informers' cache), then with what the passes
			// keep (the memo, the hold's and frag's workloads).
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			cacheMB := float64(ms.HeapAlloc) / 1e6
			pass()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			keptMB := float64(ms.HeapAlloc)/1e6 - cacheMB
			b.ResetTimer()
			var res PassResult
			for range b.N {
				res = pass()
			}
			b.StopTimer()
			b.ReportMetric(cacheMB, "cache-MB")
			b.ReportMetric(keptMB, "kept-MB")
			b.ReportMetric(float64(res.Allocated), "allocated")
			b.ReportMetric(float64(res.Held), "held")
		})
	}
}
