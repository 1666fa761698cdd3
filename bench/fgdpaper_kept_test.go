package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Keeping the cluster's objects and model pieces between drasat's windows
// (runDrasat without freshWindows) changes nothing: on a small cluster,
// every task gets the same node and GPUs, hence every window the same
// allocation, and the curve is the same, as when every window is built
// anew from its objects. Both policies, windows of 1 (the one-task
// window) and of the default size.
func TestFPDrasatKeptWindowsMatchFresh(t *testing.T) {
	nodes, l := fpTestCluster(t, "default")
	// Twenty nodes with GPUs, of several sizes and models.
	var pick []fpNode
	for i, n := range nodes {
		if n.gpus > 0 && i%5 == 0 && len(pick) < 20 {
			pick = append(pick, n)
		}
	}
	for _, c := range []struct {
		binpack bool
		window  int
		cpu     string
	}{{false, DefaultFPDrasatWindow, FPCPUMostAllocated}, {false, 1, FPCPUScheduler}, {true, DefaultFPDrasatWindow, FPCPUScheduler}, {false, DefaultFPDrasatWindow, FPCPUDrasat}} {
		t.Run(fmt.Sprintf("binpack=%v/window=%d/cpu=%s", c.binpack, c.window, c.cpu), func(t *testing.T) {
			run := func(fresh bool) (*fpSim, *fpCurve) {
				s := newFPSim(pick, l, FPDrasat, 5, nil)
				s.freshWindows = fresh
				arr := fpArrivals(l, s.capMilli, FGDPaperRatio, 5)
				curve, err := s.runDrasat(context.Background(), arr, c.window, time.Minute, c.cpu, false, c.binpack, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s, curve
			}
			fresh, freshCurve := run(true)
			kept, keptCurve := run(false)
			if len(fresh.placed) < 150 {
				t.Fatalf("only %d arrivals", len(fresh.placed))
			}
			gpuTasks := 0
			for i, f := range fresh.placed {
				k := kept.placed[i]
				if f.node != k.node || !slices.Equal(f.gpus, k.gpus) {
					t.Fatalf("arrival %d: built anew on node %d GPUs %v, kept on node %d GPUs %v", i, f.node, f.gpus, k.node, k.gpus)
				}
				if f.node >= 0 && f.task.num > 0 {
					gpuTasks++
				}
			}
			if gpuTasks == 0 {
				t.Fatal("no GPU task placed")
			}
			if !reflect.DeepEqual(freshCurve, keptCurve) {
				t.Fatal("the curves differ")
			}
			// Kept, the look-ahead's shapes are built once for the
			// cluster and then for each new claim spec alone: at most
			// once per spec, however many windows (the CPU-only tasks'
			// placement included, cpu=drasat).
			specs := map[string]bool{}
			for _, pl := range kept.placed {
				if c := fpWorkloadClaim(pl.task); c != nil {
					js, _ := json.Marshal(c.Spec.Devices)
					specs[string(js)] = true
				}
			}
			if kept.shapeBuilds > len(specs) {
				t.Fatalf("kept windows built the look-ahead's shapes %d times for %d claim specs", kept.shapeBuilds, len(specs))
			}
			t.Logf("%d arrivals, %d GPU tasks placed", len(fresh.placed), gpuTasks)
		})
	}
}
