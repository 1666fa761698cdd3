package frag

import "time"

// ComputeAfresh makes m work every outcome out anew (no remembered
// outcomes or GPU rows), as before they were remembered: the tests'
// yardstick for the memo (memo.go).
func (m *Measure) ComputeAfresh() { m.noMemo = true }

// RefineUncapped lifts Refine's own cap (alloc.MaxLookahead) until the
// returned function is called: a test comparing two whole searches must
// not see one cut by the clock.
func RefineUncapped() (restore func()) {
	old := maxRefine
	maxRefine = time.Hour
	return func() { maxRefine = old }
}
