package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"

	"github.com/drasat/drasat/k8s"
)

// liveFlags tune how fast drasat talks to the API server and how long it
// batches. The client defaults are the kube-scheduler's (its
// clientConnection: qps 50, burst 100), so drasat writes as fast as the
// scheduler it replaces.
func liveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "kube-api-qps", Value: 50, Usage: "API requests per second (as kube-scheduler's default)"},
		&cli.IntFlag{Name: "kube-api-burst", Value: 100, Usage: "API request burst (as kube-scheduler's default)"},
		&cli.IntFlag{Name: "write-workers", Value: 8, Usage: "claim writes and gate removals in flight at once"},
		&cli.DurationFlag{Name: "max-window", Value: 30 * time.Second, Usage: "most latency the adaptive batching window may add while claims keep arriving"},
		&cli.DurationFlag{Name: "release-window", Value: k8s.DefaultReleaseWindow, Usage: "most the window waits after the first release while only releases come (departing pods): the devices freed so far are then solved for, the later ones by the next pass"},
	}
}

// applyLiveFlags sets the client rate and the live options.
func applyLiveFlags(c *cli.Context, cfg *rest.Config, opts *k8s.Options) error {
	qps, burst := c.Float64("kube-api-qps"), c.Int("kube-api-burst")
	if qps <= 0 || burst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive (got %v, %d)", qps, burst)
	}
	if c.Int("write-workers") < 1 {
		return fmt.Errorf("--write-workers must be at least 1 (got %d)", c.Int("write-workers"))
	}
	if c.Duration("max-window") < 0 {
		return fmt.Errorf("--max-window must not be negative")
	}
	if c.Duration("release-window") <= 0 {
		return fmt.Errorf("--release-window must be positive (got %s)", c.Duration("release-window"))
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	opts.WriteWorkers = c.Int("write-workers")
	opts.MaxWindow = max(c.Duration("max-window"), opts.BatchWindow)
	opts.ReleaseWindow = c.Duration("release-window")
	return nil
}
