package alloc

import "time"

// Limits are the engine's size thresholds and work bounds, each of which
// picks a path through the pipeline or bounds a stage's work (the SAT
// model's size limit is Options.MaxVariables). A zero field means its
// default, the value given with it; the engine's answers at the defaults
// are the ones docs/performance.md measures. Tests set small values to
// drive small instances down every path and compare them with brute
// force.
type Limits struct {
	// SearchSteps bounds the first-fit search of one claim on one node
	// (the alone bound, the greedy incumbent, the ordered repack's
	// placement as it is): 20,000. A claim the search gives up on counts
	// as fitting for the bound and is left to the later stages.
	SearchSteps int
	// BestFitSteps is best-fit's search per claim, shared among the nodes
	// it looks at, each getting at least BestFitMinSteps: 20,000 and 300.
	BestFitSteps, BestFitMinSteps int
	// BestFitWork bounds best-fit's tries × the component's claims:
	// 16,000 (at least two tries).
	BestFitWork int

	// The neighbourhood search (lns.go): at most LNSSteps steps (400),
	// ending after LNSPatience steps in a row without improvement (80) or
	// LNSGiveUp steps in a row that ran out of time at the smallest
	// neighbourhood (10). A neighbourhood holds LNSMinBins to LNSMaxBins
	// bins (2 to 16), growing while steps take less than LNSQuick (20 ms);
	// one step's solve gets at most LNSStepTime (200 ms). Beyond the
	// claims it frees, a step considers at most LNSOthers non-simple
	// claims not admitted (12), LNSClassCap of a class (2).
	LNSSteps, LNSPatience, LNSGiveUp int
	LNSMinBins, LNSMaxBins           int
	LNSOthers, LNSClassCap           int
	LNSQuick, LNSStepTime            time.Duration

	// LowerMin and LowerMax clamp the time of the lower objective levels
	// (firstAvailable preference, packing): three times as long as the
	// pipeline ran before them, within 100 ms and 2 s.
	LowerMin, LowerMax time.Duration

	// DiveLPRows is the largest per-node aggregated model (rows of its LP)
	// the aggregate dive solves as it is: 2,000 (about 16 nodes of
	// A100s). Larger components dive on the global model, spread over
	// the nodes.
	DiveLPRows int
}

// DefaultLimits are the limits the engine runs with.
var DefaultLimits = Limits{
	SearchSteps:     20_000,
	BestFitSteps:    20_000,
	BestFitMinSteps: 300,
	BestFitWork:     16_000,
	LNSSteps:        400,
	LNSPatience:     80,
	LNSGiveUp:       10,
	LNSMinBins:      2,
	LNSMaxBins:      16,
	LNSOthers:       12,
	LNSClassCap:     2,
	LNSQuick:        20 * time.Millisecond,
	LNSStepTime:     200 * time.Millisecond,
	LowerMin:        100 * time.Millisecond,
	LowerMax:        2 * time.Second,
	DiveLPRows:      2_000,
}

// withDefaults fills the zero (or negative) fields with DefaultLimits'.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.SearchSteps, d.SearchSteps)
	set(&l.BestFitSteps, d.BestFitSteps)
	set(&l.BestFitMinSteps, d.BestFitMinSteps)
	set(&l.BestFitWork, d.BestFitWork)
	set(&l.LNSSteps, d.LNSSteps)
	set(&l.LNSPatience, d.LNSPatience)
	set(&l.LNSGiveUp, d.LNSGiveUp)
	set(&l.LNSMinBins, d.LNSMinBins)
	set(&l.LNSMaxBins, d.LNSMaxBins)
	set(&l.LNSOthers, d.LNSOthers)
	set(&l.LNSClassCap, d.LNSClassCap)
	set(&l.DiveLPRows, d.DiveLPRows)
	setD(&l.LNSQuick, d.LNSQuick)
	setD(&l.LNSStepTime, d.LNSStepTime)
	setD(&l.LowerMin, d.LowerMin)
	setD(&l.LowerMax, d.LowerMax)
	l.LNSMaxBins = max(l.LNSMaxBins, l.LNSMinBins)
	l.LowerMax = max(l.LowerMax, l.LowerMin)
	return l
}
