package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/drasat/drasat/k8s"
	"github.com/go-logr/zapr"
	"k8s.io/klog/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

func allocateCommand() *cli.Command {
	return &cli.Command{
		Name:      "allocate",
		Usage:     "allocate all pending ResourceClaims in the given objects, optimally",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "filename", Aliases: []string{"f"}, Usage: "file, directory or - (stdin) with ResourceSlices, DeviceClasses, ResourceClaims, Nodes, Pods; without it, the cluster's"},
			kubeconfigFlag(), contextFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "print the allocations only (allocate never writes to the cluster; the flag says so explicitly)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "yaml", Usage: "yaml, json or table"},
			&cli.StringFlag{Name: "objective", Value: alloc.MaxClaims, Usage: "max-claims or ordered"},
			&cli.BoolFlag{Name: "cbc", Usage: "let the aggregate stage solve per-node GPU patterns with CBC (the coinor-cbc executable on PATH); off: pure Go"},
			&cli.BoolFlag{Name: "aggregate-sat", Usage: "let the aggregate stage search per-node GPU patterns in Go (experimental; --cbc wins when both are given)"},
			&cli.StringFlag{Name: "policy", Value: alloc.Binpack, Usage: "binpack, spread or frag (admit the most claims, then leave the cluster least fragmented for the claims seen so far)"},
			&cli.StringFlag{Name: "compat", Value: model.CompatKEP5963, Usage: "compatibility-group semantics: kep5963 or wildcard"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "solve budget; the best allocation found so far is returned"},
			&cli.BoolFlag{Name: "strict", Usage: "fail when a pool is incomplete or invalid instead of leaving it out"},
			&cli.StringFlag{Name: "report", Usage: "write a JSON report to this file"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the whole run (reading included) to this file, for go tool pprof"},
			&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile (allocations over the run, and what is live once the solve ends) to this file, for go tool pprof"},
			&cli.StringFlag{Name: "log-level", Usage: "log the engine's slow paths (the build, each stage) to stderr at this level (debug shows them; info, warn or error)"},
		},
		Action: runAllocate,
	}
}

func runAllocate(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	format := c.String("output")
	if format != "yaml" && format != "json" && format != "table" {
		return fmt.Errorf("flag --output: %q is not yaml, json or table", format)
	}
	timeout, err := timeoutFlag(c)
	if err != nil {
		return err
	}
	if level := c.String("log-level"); level != "" {
		log, err := k8s.NewLogger(level, true)
		if err != nil {
			return fmt.Errorf("flag --log-level: %w", err)
		}
		defer func() { _ = log.Sync() }()
		ctx = klog.NewContext(ctx, zapr.NewLogger(log.Named("engine")))
	}
	stopCPU, writeHeap, err := startProfiles(c.String("cpuprofile"), c.String("memprofile"))
	if err != nil {
		return err
	}
	defer stopCPU()
	// Loading stops on Ctrl-C; --timeout is the solve budget, after which
	// the best allocation found is still written. The report states the
	// reading time apart.
	readStart := time.Now()
	objs, warnings, err := loadObjects(ctx, c)
	readTime := time.Since(readStart)
	if err != nil {
		return err
	}
	if err := input.CheckLimits(objs); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	// Building the problem (CEL selectors above all) counts against
	// --timeout; the solver gets what is left.
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := model.Build(bctx, objs, model.Options{Compat: c.String("compat")})
	if err != nil {
		if bctx.Err() != nil {
			return ctxError(bctx, "building the problem")
		}
		return err
	}
	buildTime := time.Since(start)
	for _, is := range p.Issues {
		if c.Bool("strict") {
			return fmt.Errorf("%s", is)
		}
		fmt.Fprintln(os.Stderr, "warning:", is)
	}
	for _, w := range p.Warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	opts := alloc.Options{
		Objective:    c.String("objective"),
		Policy:       c.String("policy"),
		UseCBC:       c.Bool("cbc"),
		AggregateSAT: c.Bool("aggregate-sat"),
		Progress:     progress(),
	}
	deadline := start.Add(timeout) // for the reasons: what is left of --timeout
	if opts.Policy == alloc.Frag {
		// The workload to come is unknown to a one-shot run: the input's
		// claims stand for it. Their selectors are evaluated within
		// --timeout too.
		if opts.Lookahead, err = frag.For(bctx, objs, p, nil); err != nil {
			return err
		}
	}
	opts.Timeout = alloc.TimeLeft(timeout, start)
	res, err := alloc.Run(ctx, p, opts)
	if err != nil {
		return err
	}
	writeHeap()
	// Why claims fit nowhere: within what is left of --timeout; Ctrl-C
	// stops it.
	explain.FillReasons(ctx, p, res.Unplaceable, res.Rejected, deadline)
	if err := ctx.Err(); err != nil {
		return err
	}
	// Everything is rendered to memory first: no partial output on error.
	var out bytes.Buffer
	if format == "table" {
		err = alloc.WriteTable(&out, p, res)
	} else {
		claims, aerr := alloc.Allocated(p, res)
		if aerr != nil {
			return aerr
		}
		err = alloc.WriteClaims(&out, format, claims)
	}
	if err != nil {
		return err
	}
	if path := c.String("report"); path != "" {
		rep := alloc.NewReport(p, res, opts)
		rep.ReadSeconds, rep.BuildSeconds = readTime.Seconds(), buildTime.Seconds()
		if err := writeJSONFile(path, rep); err != nil {
			return err
		}
	}
	if _, err := os.Stdout.Write(out.Bytes()); err != nil {
		return err
	}
	var keys []int
	for i := range res.Rejected {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	for _, i := range keys {
		fmt.Fprintf(os.Stderr, "unallocated: %s: %s\n", alloc.Printable(p.Claims[i].Key), alloc.Printable(res.Rejected[i].Error()))
	}
	st := res.Stats
	state := "optimal"
	if !st.Optimal {
		state = fmt.Sprintf("best found, bound %d, gap %.2f%%", st.Bound, 100*st.Gap())
	}
	fmt.Fprintf(os.Stderr, "allocated %d of %d pending claims (%s)\n", st.Admitted, st.Pending, state)
	return nil
}

// timeoutFlag reads --timeout, which must be positive.
func timeoutFlag(c *cli.Context) (time.Duration, error) {
	d := c.Duration("timeout")
	if d <= 0 {
		return 0, fmt.Errorf("flag --timeout: %v is not a positive duration (for example 10s)", d)
	}
	return d, nil
}

// writeJSONFile writes atomically: a new temporary file in the same
// directory (created exclusively, so a symlink placed there is never
// followed), renamed into place; a symlink at path is replaced, not
// written through. Readers see the old file or the whole new one.
func writeJSONFile(path string, v any) (err error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// progress draws a one-line counter on a terminal; nothing otherwise.
func progress() func(done, total int) {
	st, err := os.Stderr.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return func(done, total int) {
		if total < 2 {
			return
		}
		fmt.Fprintf(os.Stderr, "\rsolving components %d/%d", done, total)
		if done == total {
			fmt.Fprintln(os.Stderr)
		}
	}
}
