package k8s

import (
	"testing"
	"time"
)

func TestBatchBoundLearntFromSolverCost(t *testing.T) {
	r := &Reconciler{Opts: Options{Timeout: 10 * time.Second}}
	if r.maxBatch() != 0 {
		t.Fatal("no bound before any solve")
	}
	r.adaptBatch(1000, true, 0, 2*time.Second)
	if r.maxBatch() != 0 {
		t.Error("a proven solve set a bound")
	}
	r.adaptBatch(1000, false, 0.01, 10*time.Second)
	if r.maxBatch() != 0 {
		t.Error("a solve out of budget with a gap within 5 % set a bound")
	}
	r.adaptBatch(1000, false, 0.2, 10*time.Second)
	if r.maxBatch() != 500 {
		t.Errorf("a solve out of budget with a 20 %% gap: bound %d, want 500", r.maxBatch())
	}
	r.adaptBatch(500, false, 0.2, 10*time.Second)
	r.adaptBatch(250, false, 0.2, 10*time.Second)
	r.adaptBatch(125, false, 0.2, 10*time.Second)
	if r.maxBatch() != minAdaptiveBatch {
		t.Errorf("bound %d, want the floor %d", r.maxBatch(), minAdaptiveBatch)
	}
	r.adaptBatch(64, true, 0, time.Second)
	if r.maxBatch() != 128 {
		t.Errorf("a fast proven solve: bound %d, want doubled to 128", r.maxBatch())
	}
	r.adaptBatch(50, true, 0, time.Second)
	if r.maxBatch() != 0 {
		t.Errorf("a fast proven solve well below the bound: bound %d, want none", r.maxBatch())
	}
	r.Opts.MaxBatch = 300
	if r.maxBatch() != 300 {
		t.Error("--max-batch ignored")
	}
}
