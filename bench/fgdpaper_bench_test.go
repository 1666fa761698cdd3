package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkFPDrasatWindow runs one drasat curve of the fgd-paper protocol
// (default list, seed 1, windows of DefaultFPDrasatWindow) per operation on
// a sample of the trace's nodes or all of them, and reports the time per
// window next to the curve's unallocated share at 100 % arrived. The speed
// target, one curve on the whole cluster within 10 minutes on one core, is
// its nodes=all/drasat case with -cpu 1 -benchtime 1x (docs/performance.md).
func BenchmarkFPDrasatWindow(b *testing.B) {
	dir, err := OpenBDir("")
	if err != nil {
		b.Skipf("trace not available: %v", err)
	}
	for _, nodes := range []int{128, 0} {
		for _, pol := range []string{FPDrasat, FPDrasatBinpack} {
			name := fmt.Sprintf("nodes=%d/%s", nodes, pol)
			if nodes == 0 {
				name = "nodes=all/" + pol
			}
			b.Run(name, func(b *testing.B) {
				var windows int
				var unalloc float64
				start := time.Now()
				for i := 0; i < b.N; i++ {
					windows = 0
					rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"default"}, Nodes: nodes,
						Policies: []string{pol}, Seed: 1, Seeds: 1, DrasatCPU: FPCPUMostAllocated,
						Progress: func(_, _ int, label string) {
							if strings.HasSuffix(label, "% arrived") { // after each window
								windows++
							}
						}})
					if err != nil {
						b.Fatal(err)
					}
					unalloc = rep.Results[0].At(100).Median
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N*max(windows, 1)), "ms/window")
				b.ReportMetric(float64(windows), "windows")
				b.ReportMetric(unalloc, "unalloc%@100")
			})
		}
	}
}
