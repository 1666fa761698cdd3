package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/bench"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "compare drasat with the kube-scheduler's allocator and first-fit baselines on generated clusters and the Alibaba trace",
		Description: `Scenarios: mig (MIG partitions of A100s, H100s or both, --mig-gpu), tpu
(multi-host TPU slices), modes (GPUs with mutually exclusive modes, under --compat
kep5963 and wildcard), openb (replay of the Alibaba GPU trace in
../shared/data/alibaba-openb). Sizes are NODESxGPUS:CLAIMS (mig,
modes), NODES:CLAIMS (tpu; NODES a multiple of 16) or NODES:TASKS (openb; 0 = all).
Every allocation of every policy is validated by the independent feasibility checker;
an invalid one fails the run.`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "scenario", Aliases: []string{"s"}, Value: cli.NewStringSlice("mig"), Usage: "scenarios to run: " + strings.Join(bench.Scenarios, ", ")},
			&cli.StringSliceFlag{Name: "size", Usage: "sizes, as SCENARIO=SIZE[,SIZE] or SIZE[,SIZE] for all given scenarios (defaults: mig " + bench.DefaultSizes["mig"] + "; tpu " + bench.DefaultSizes["tpu"] + "; modes " + bench.DefaultSizes["modes"] + "; openb " + bench.DefaultSizes["openb"] + ")"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed; the same seed gives the same instances and results"},
			&cli.IntFlag{Name: "repeat", Value: 1, Usage: "runs per policy; the median wall time is reported"},
			&cli.StringSliceFlag{Name: "policy", Aliases: []string{"p"}, Value: cli.NewStringSlice(bench.Policies...), Usage: "policies: " + strings.Join(bench.Policies, ", ")},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "drasat's budget per batch"},
			&cli.StringFlag{Name: "json", Usage: "write the report as JSON to this file"},
			&cli.StringFlag{Name: "html", Usage: "write a self-contained HTML report with SVG charts to this file"},
			&cli.StringFlag{Name: "mig-gpu", Value: "a100", Usage: "GPU fleet of the mig scenario: a100 (A100-40GB), h100 (H100-80GB) or mixed (A100 and H100 nodes alternating)"},
			&cli.StringFlag{Name: "openb-data", Usage: "directory of the Alibaba trace (default: ../shared/data/alibaba-openb beside the repository)"},
			&cli.StringFlag{Name: "openb-pods", Value: "default", Usage: "task list: default, gpushare100 or multigpu50"},
			&cli.StringFlag{Name: "openb-gpu", Value: "a100", Usage: "GPU model every trace GPU is published as: a100 or h100"},
			&cli.DurationFlag{Name: "openb-window", Value: time.Minute, Usage: "batch window: arrivals within it are allocated together (trace time, after --openb-load)"},
			&cli.Float64Flag{Name: "openb-load", Value: bench.DefaultOpenBLoad, Usage: "arrival compression: creation times are divided by this, durations kept"},
			&cli.BoolFlag{Name: "no-progress", Usage: "no progress bar"},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := benchConfig(c)
	if err != nil {
		return err
	}
	if !c.Bool("no-progress") && isTerminal(os.Stderr) {
		cfg.Progress = progressBar(os.Stderr)
	}
	// Generators and checkers do not all watch ctx: Ctrl-C returns at
	// once, leaving them to end with the process.
	var rep *bench.Report
	err = interruptible(ctx, "bench", func() error {
		var err error
		rep, err = bench.Run(ctx, cfg)
		return err
	})
	if err != nil {
		var inv *bench.InvalidError
		if errors.As(err, &inv) {
			fmt.Fprintln(os.Stderr, "drasat bench: FAILED:", err)
		}
		return err
	}
	if err := bench.WriteTable(os.Stdout, rep); err != nil {
		return err
	}
	if f := c.String("json"); f != "" {
		var buf bytes.Buffer
		if err := bench.WriteJSON(&buf, rep); err != nil {
			return err
		}
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if f := c.String("html"); f != "" {
		var buf bytes.Buffer
		if err := bench.WriteHTML(&buf, rep); err != nil {
			return err
		}
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// benchConfig reads the flags into a run configuration, rejecting bad
// values with the flag's name.
func benchConfig(c *cli.Context) (bench.Config, error) {
	cfg := bench.Config{
		Scenarios: c.StringSlice("scenario"),
		Sizes:     map[string][]bench.Size{},
		Seed:      c.Uint64("seed"),
		Repeat:    c.Int("repeat"),
		Policies:  c.StringSlice("policy"),
		Timeout:   c.Duration("timeout"),
		MIGGPU:    strings.ToLower(strings.TrimSpace(c.String("mig-gpu"))),
		OpenB: bench.OpenBConfig{Dir: c.String("openb-data"), Pods: c.String("openb-pods"), GPU: c.String("openb-gpu"),
			Window: c.Duration("openb-window"), Load: c.Float64("openb-load")},
	}
	for _, s := range c.StringSlice("size") {
		scs := cfg.Scenarios
		if sc, sizes, ok := strings.Cut(s, "="); ok {
			scs, s = []string{sc}, sizes
		}
		sizes, err := bench.ParseSizes(s)
		if err != nil {
			return cfg, fmt.Errorf("flag --size: %w", err)
		}
		for _, sc := range scs {
			cfg.Sizes[sc] = append(cfg.Sizes[sc], sizes...)
		}
	}
	if _, err := bench.MIGFleet(cfg.MIGGPU); err != nil {
		return cfg, fmt.Errorf("flag --mig-gpu: %w", err)
	}
	return cfg, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws "[#####     ] 12/40 label" on one terminal line.
func progressBar(f *os.File) func(done, total int, label string) {
	start := time.Now()
	return func(done, total int, label string) {
		const width = 30
		filled := 0
		if total > 0 {
			filled = width * done / total
		}
		if len(label) > 40 {
			label = label[:40]
		}
		fmt.Fprintf(f, "\r\033[K[%s%s] %d/%d %s %s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled),
			done, total, time.Since(start).Round(time.Second), label)
		if done == total {
			fmt.Fprintln(f)
		}
	}
}
