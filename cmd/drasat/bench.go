package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "compare drasat with the kube-scheduler's allocator and first-fit baselines on generated clusters and the Alibaba trace",
		Description: `Scenarios: mig (MIG partitions of A100s, H100s or both, as the NVIDIA DRA
driver publishes them, --mig-gpu), scale (the largest GPU fleets: A100 nodes from
tools/scalegen, a generator apart from mig's, a quarter of the GPUs already holding
MIG devices; 128 to 2,000 nodes, minutes per policy at the largest), tpu (multi-host
TPU slices), modes (GPUs with
mutually exclusive modes, under --compat kep5963 and wildcard), nic (NICs shared by
bandwidth: consumable capacity), gpu-nic (8 GPUs and 4 NICs per node on 4 PCIe
roots; claims for GPUs each with a NIC share on its root),
openb (replay of the Alibaba GPU trace in ../shared/data/alibaba-openb, a task
not admitted in its window is dropped), openb-wait (the same replay, unadmitted
tasks wait and are retried), inflation (the FGD paper's protocol: tasks drawn
from the pod list arrive without departures until they request the cluster's
GPUs), fgd-paper (the FGD paper's experiment on the trace's own 1,213 nodes with CPU,
memory and shared GPUs, every pod list of the trace folder, --seeds runs, the paper's
policies random, dotprod, gpu-clustering, gpu-packing, bestfit and fgd, first-fit,
upstream, drasat-binpack and drasat unless -p says otherwise, --fgd-workers curves at
once; docs/bench.md),
research and research-openb (the modes workload and the trace under
every partitioning model: groups, wildcard, compatibleOnlyWith, the KEP-4815
draft, static modes; docs/research.md). Sizes are NODESxGPUS:CLAIMS (mig,
modes, research), NODES:CLAIMS (tpu, NODES a multiple of 16; gpu-nic; nic, two
NICs per node, or NODESxNICS:CLAIMS), NODES:TASKS (openb, openb-wait, research-openb;
0 = all) or NODES:BATCH (inflation).
Every allocation of every policy is validated by the independent feasibility checker;
an invalid one fails the run.`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "scenario", Aliases: []string{"s"}, Value: cli.NewStringSlice("mig"), Usage: "scenarios to run: " + strings.Join(bench.Scenarios, ", ")},
			&cli.StringSliceFlag{Name: "size", Usage: "sizes, as SCENARIO=SIZE[,SIZE] or SIZE[,SIZE] for all given scenarios (defaults: mig " + bench.DefaultSizes["mig"] + "; scale " + bench.DefaultSizes["scale"] + "; tpu " + bench.DefaultSizes["tpu"] + "; modes " + bench.DefaultSizes["modes"] + "; nic " + bench.DefaultSizes["nic"] + "; gpu-nic " + bench.DefaultSizes["gpu-nic"] + "; openb " + bench.DefaultSizes["openb"] + ")"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed; the same seed gives the same instances and results"},
			&cli.IntFlag{Name: "repeat", Value: 1, Usage: "runs per policy; the median wall time is reported"},
			&cli.BoolFlag{Name: "cbc", Usage: "let the aggregate stage solve per-node GPU patterns with CBC (the coinor-cbc executable on PATH); off: pure Go"},
			&cli.StringSliceFlag{Name: "policy", Aliases: []string{"p"}, Value: cli.NewStringSlice(bench.Policies...), Usage: "policies: " + strings.Join(bench.Policies, ", ")},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "drasat's budget per batch, building its model included"},
			&cli.StringFlag{Name: "json", Usage: "write the report as JSON to this file"},
			&cli.StringFlag{Name: "html", Usage: "write a self-contained HTML report with SVG charts to this file"},
			&cli.StringFlag{Name: "mig-gpu", Value: "a100", Usage: "GPU fleet of the mig scenario: a100 (A100-40GB), h100 (H100-80GB), mixed (A100 and H100 nodes alternating) or versions (A100 nodes alternating between NVIDIA driver v0.4.0 and v25.12.0)"},
			&cli.StringSliceFlag{Name: "mig-family", Usage: "claim mixes of the mig scenario, each run at every size: " + strings.Join(gen.MIGFamilies, ", ") + " (default: default)"},
			&cli.StringFlag{Name: "mig-mix", Usage: "single settings of the mig claim mix, KEY=VALUE[,KEY=VALUE]: " + migMixUsage()},
			&cli.StringFlag{Name: "openb-data", Usage: "directory of the Alibaba trace (default: ../shared/data/alibaba-openb beside the repository)"},
			&cli.StringFlag{Name: "openb-pods", Value: "default", Usage: "task list: default, gpushare100 or multigpu50"},
			&cli.StringFlag{Name: "openb-gpu", Value: "a100", Usage: "GPU model every trace GPU is published as: a100 or h100"},
			&cli.DurationFlag{Name: "openb-window", Value: time.Minute, Usage: "batch window: arrivals within it are allocated together (trace time, after --openb-load)"},
			&cli.Float64Flag{Name: "openb-load", Value: bench.DefaultOpenBLoad, Usage: "arrival compression: creation times are divided by this, durations kept"},
			&cli.DurationFlag{Name: "openb-max-wait", Usage: "openb-wait: drop a task pending longer than this (trace time; 0: never)"},
			&cli.BoolFlag{Name: "openb-gpu-only", Usage: "openb, openb-wait, inflation: the GPU tasks alone, on nodes without CPU or memory (the replays before they carried each task's pod; by default every task is a pod with the trace's CPU and memory, CPU-only tasks placed by the scheduler's default scores)"},
			&cli.BoolFlag{Name: "openb-no-reserve", Usage: "openb, openb-wait: the drasat policy without its node reservation for a task that waits because it fits nowhere (to measure it)"},
			&cli.StringFlag{Name: "openb-objective", Value: "max-claims", Usage: "openb, openb-wait, inflation: the objective of the drasat policies, max-claims or ordered (admit in arrival order, each task iff it fits with those before it)"},
			&cli.DurationFlag{Name: "openb-hold", Usage: "openb, openb-wait: the drasat policy holds tasks back for forecast demand, each at most this long after its arrival (trace time; 0: off), as drasat controller --hold does"},
			&cli.DurationFlag{Name: "openb-hold-idle-per-claim", Usage: "with --openb-hold: what one more task admitted is worth in idle device time, as drasat controller --hold-idle-per-claim (0: its default)"},
			&cli.DurationFlag{Name: "openb-aging", Usage: "openb-wait: a waiting task's weight (drasat.dev/weight) grows by 1 per this much wait (0: off)"},
			&cli.StringFlag{Name: "inflation-trace", Usage: "inflation: write every batch's decisions to this file, tab-separated: each task with the node it got (- when turned away), then each node's free GPUs, CPU and memory (why a policy turned tasks away)", TakesFile: true},
			&cli.IntFlag{Name: "inflation-batch", Value: bench.DefaultInflationBatch, Usage: "inflation: tasks per batch (a size NODES:BATCH overrides it)"},
			&cli.IntFlag{Name: "seeds", Value: 10, Usage: "fgd-paper: seeds per policy and list (--seed, --seed+1, ...); the table gives median and min–max"},
			&cli.StringSliceFlag{Name: "fgd-list", Usage: "fgd-paper: pod lists to run, by name (default for openb_pod_list_default.csv; default: every list in the trace folder)"},
			&cli.IntFlag{Name: "fgd-nodes", Usage: "fgd-paper: sample this many of the trace's nodes with --seed (0: all 1,213); the arrivals scale with their GPUs"},
			&cli.StringFlag{Name: "fgd-arrivals", Value: bench.FPArrivalsSimulator, Usage: "fgd-paper: the random stream that orders and draws the tasks: simulator (the paper's simulator's own, so that a seed's arrivals are the paper's for that seed) or pcg (drasat's earlier stream)"},
			&cli.IntFlag{Name: "fgd-window", Value: bench.DefaultFPDrasatWindow, Usage: "fgd-paper: the drasat policy decides this many GPU arrivals together (within --timeout)"},
			&cli.StringFlag{Name: "fgd-drasat-cpu", Value: "drasat", Usage: "fgd-paper: who places CPU-only tasks in the drasat policies: drasat (drasat itself, as the controller does with its default --place-pods-without-claims for the pods it is given), scheduler (the kube-scheduler's default scores: a cluster whose CPU-only pods are not given to drasat), most-allocated (the kube-scheduler with the profile in deploy/scheduler) or fgd (FGD's score, an ablation)"},
			&cli.BoolFlag{Name: "fgd-drasat-no-scarcity", Usage: "fgd-paper: the drasat policy's look-ahead weighs FGD's measure alone, without the cost of taking GPUs that tasks held to their model will want (an ablation)"},
			&cli.StringFlag{Name: "fgd-drasat-workload", Value: bench.FPWorkloadList, Usage: "fgd-paper: what the drasat policies' look-ahead learns the workload from: list (every task of the pod list, known before the first arrives, as FGD's target workload is) or arrived (the tasks arrived so far, as they come: a controller started on an empty cluster)"},
			&cli.BoolFlag{Name: "fgd-drasat-gpu-shapes", Usage: "fgd-paper: the drasat policy's look-ahead learns task shapes by their claims alone, without the pods' CPU"},
			&cli.StringFlag{Name: "fgd-turned-away", Usage: "fgd-paper: write the tasks each policy turned away (list, policy, seed, arrival, task, arrived share, what it asked for) to this file, tab-separated", TakesFile: true},
			&cli.IntFlag{Name: "fgd-workers", Value: runtime.NumCPU(), DefaultText: "the CPUs", Usage: "fgd-paper: curves run at once (each a list, policy and seed); the table does not depend on it"},
			&cli.BoolFlag{Name: "fgd-verify", Usage: "fgd-paper: check the final state of each policy's first seed with the independent checker (about 30 s per list and policy)"},
			&cli.BoolFlag{Name: "no-progress", Usage: "no progress bar"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "fgd-paper: write a CPU profile of the run to this file, for go tool pprof"},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, sc := range c.StringSlice("scenario") {
		if sc == "fgd-paper" {
			return runFGDPaper(ctx, c)
		}
	}
	cfg, err := benchConfig(c)
	if err != nil {
		return err
	}
	if !c.Bool("no-progress") && isTerminal(os.Stderr) {
		cfg.Progress = progressBar(os.Stderr)
	}
	var trace bytes.Buffer
	if c.String("inflation-trace") != "" {
		if !slices.Contains(cfg.Scenarios, "inflation") {
			return fmt.Errorf("flag --inflation-trace: only the inflation scenario writes one (-s inflation)")
		}
		cfg.OpenB.InflationTrace = bench.NewInflationTrace(&trace)
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
	if f := c.String("inflation-trace"); f != "" {
		if err := os.WriteFile(f, trace.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fpGCPercent is the fgd-paper run's GOGC and fpMemPerCurve its soft
// memory limit per curve running (--fgd-workers), unless the environment
// sets GOGC or GOMEMLIMIT.
const (
	fpGCPercent   = 400
	fpMemPerCurve = 1536 << 20
)

// runFGDPaper runs the fgd-paper scenario, which runs alone: its own
// policies, seeds and lists.
func runFGDPaper(ctx context.Context, c *cli.Context) (err error) {
	if len(c.StringSlice("scenario")) != 1 {
		return fmt.Errorf("--scenario fgd-paper runs alone (its policies and table are its own)")
	}
	if c.Int("seeds") < 1 {
		return fmt.Errorf("--seeds %d: want at least 1", c.Int("seeds"))
	}
	cfg := bench.FGDPaperConfig{Dir: c.String("openb-data"), Lists: c.StringSlice("fgd-list"), Seed: c.Uint64("seed"),
		Seeds: c.Int("seeds"), Verify: c.Bool("fgd-verify"), Nodes: c.Int("fgd-nodes"), Window: c.Int("fgd-window"), Timeout: c.Duration("timeout")}
	if _, err := timeoutFlag(c); err != nil {
		return err
	}
	if cfg.Workers = c.Int("fgd-workers"); cfg.Workers < 1 {
		return fmt.Errorf("--fgd-workers %d: want at least 1", cfg.Workers)
	}
	cfg.Arrivals = c.String("fgd-arrivals")
	cfg.DrasatCPU = c.String("fgd-drasat-cpu")
	cfg.DrasatGPUShapes = c.Bool("fgd-drasat-gpu-shapes")
	cfg.DrasatNoScarcity = c.Bool("fgd-drasat-no-scarcity")
	cfg.DrasatWorkload = c.String("fgd-drasat-workload")
	cfg.TurnedAway = c.String("fgd-turned-away") != ""
	if !slices.Contains(bench.FPCPUPlacers, cfg.DrasatCPU) {
		return fmt.Errorf("--fgd-drasat-cpu %q: want one of %s", cfg.DrasatCPU, strings.Join(bench.FPCPUPlacers, ", "))
	}
	if c.IsSet("policy") {
		cfg.Policies = c.StringSlice("policy")
	}
	if !c.Bool("no-progress") && isTerminal(os.Stderr) {
		cfg.Progress = progressBar(os.Stderr)
	}
	// A drasat curve builds each window's problem anew and drops it: at
	// the default GOGC the collector took a fifth of its CPU. Four times
	// the live heap cuts the curve's CPU by about a fifth, the same curve,
	// but a curve whose live heap is large (gpuspec10's drasat curve) then
	// held 4 GB: a soft limit per curve running keeps it near
	// fpMemPerCurve, collecting more often only there. GOGC and
	// GOMEMLIMIT set by the user win.
	// Both are the process's: set back when the run ends (the command's
	// tests run in one process).
	defer gcPercentUnlessSet(fpGCPercent)()
	defer memoryLimitUnlessSet(int64(cfg.Workers) * fpMemPerCurve)()
	stopCPU, _, err := startProfiles(c.String("cpuprofile"), "")
	if err != nil {
		return err
	}
	defer stopCPU()
	// Not interruptible(): the run stops within a window when ctx ends and
	// returns what finished, which is written before the command fails.
	rep, runErr := bench.RunFGDPaper(ctx, cfg)
	if runErr != nil && (rep == nil || ctx.Err() == nil) {
		return runErr
	}
	if runErr != nil {
		if cfg.Progress != nil {
			fmt.Fprintln(os.Stderr) // below the progress bar
		}
		fmt.Fprintf(os.Stderr, "bench: interrupted; written: the results (list and policy) whose every seed finished: %d\n", len(rep.Results))
		defer func() {
			if err == nil {
				err = ctxError(ctx, "bench")
			}
		}()
	}
	if err := bench.WriteFPTable(os.Stdout, rep); err != nil {
		return err
	}
	for _, out := range []struct {
		flag  string
		write func(io.Writer, *bench.FPReport) error
	}{{"json", bench.WriteFPJSON}, {"html", bench.WriteFPHTML}, {"fgd-turned-away", bench.WriteFPTurnedAway}} {
		if f := c.String(out.flag); f != "" {
			var buf bytes.Buffer
			if err := out.write(&buf, rep); err != nil {
				return err
			}
			if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchConfig reads the flags into a run configuration, rejecting bad
// values with the flag's name.
func benchConfig(c *cli.Context) (bench.Config, error) {
	if _, err := timeoutFlag(c); err != nil {
		return bench.Config{}, err
	}
	if o := c.String("openb-objective"); o != alloc.MaxClaims && o != alloc.Ordered {
		return bench.Config{}, fmt.Errorf("--openb-objective %q: want %s or %s", o, alloc.MaxClaims, alloc.Ordered)
	}
	cfg := bench.Config{
		Scenarios: c.StringSlice("scenario"),
		Sizes:     map[string][]bench.Size{},
		Seed:      c.Uint64("seed"),
		Repeat:    c.Int("repeat"),
		Policies:  c.StringSlice("policy"),
		UseCBC:    c.Bool("cbc"),
		Timeout:   c.Duration("timeout"),
		MIGGPU:    strings.ToLower(strings.TrimSpace(c.String("mig-gpu"))),
		OpenB: bench.OpenBConfig{Dir: c.String("openb-data"), Pods: c.String("openb-pods"), GPU: c.String("openb-gpu"),
			Window: c.Duration("openb-window"), Load: c.Float64("openb-load"),
			MaxWait: c.Duration("openb-max-wait"), Aging: c.Duration("openb-aging"), NoReserve: c.Bool("openb-no-reserve"), Hold: c.Duration("openb-hold"), HoldIdlePerClaim: c.Duration("openb-hold-idle-per-claim"), Objective: c.String("openb-objective"), Batch: c.Int("inflation-batch"), GPUOnly: c.Bool("openb-gpu-only")},
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
	if _, err := gen.MIGFleet(cfg.MIGGPU); err != nil {
		return cfg, fmt.Errorf("flag --mig-gpu: %w", err)
	}
	for _, f := range c.StringSlice("mig-family") {
		f = strings.ToLower(strings.TrimSpace(f))
		if _, err := gen.MIGFamilyConfig(f, 1, 1, 1, 1); err != nil {
			return cfg, fmt.Errorf("flag --mig-family: %w", err)
		}
		cfg.MIGFamilies = append(cfg.MIGFamilies, f)
	}
	if s := c.String("mig-mix"); s != "" {
		mix, err := gen.ParseMIGMix(s)
		if err != nil {
			return cfg, fmt.Errorf("flag --mig-mix: %w", err)
		}
		cfg.MIGMix = mix
	}
	return cfg, nil
}

// migMixUsage lists the --mig-mix keys.
func migMixUsage() string {
	var ks []string
	for k := range gen.MIGMixKeys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, k+" ("+gen.MIGMixKeys[k]+")")
	}
	return strings.Join(parts, "; ")
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
