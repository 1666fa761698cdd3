package bench

import (
	"context"
	"fmt"
	"time"
)

// OpenBConfig configures the openb replay.
type OpenBConfig struct {
	Dir    string
	Pods   string
	GPU    string
	Window time.Duration
	Load   float64
}

// DefaultOpenBLoad is the default arrival compression.
const DefaultOpenBLoad = 100

// ReplayStats are the metrics of a replay.
type ReplayStats struct {
	Windows, OptimalWindows int
	StrandedGPUHours        float64
	MeanFreeGPUs            float64
	MinFreeGPUs             int
}

// RunOpenB replays the trace with one policy.
func RunOpenB(ctx context.Context, cfg OpenBConfig, sz Size, seed uint64, policy string, timeout time.Duration) (*Row, error) {
	return nil, fmt.Errorf("openb: not yet")
}
