package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/k8s"
	"github.com/drasat/drasat/model"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check ResourceSlices as the API server and the scheduler's allocator would, before they are published",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "filename", Aliases: []string{"f"}, Usage: "file, directory or - (stdin) with ResourceSlices (and optionally Nodes); without it, the cluster's"},
			kubeconfigFlag(), contextFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long"},
		},
		Action: runValidate,
	}
}

// kubeconfigFlag and contextFlag select the cluster that allocate,
// explain and validate read when no --filename is given.
func kubeconfigFlag() cli.Flag {
	return &cli.StringFlag{Name: "kubeconfig", Usage: "without --filename, read this cluster (default: $KUBECONFIG, ~/.kube/config, then in-cluster)"}
}

func contextFlag() cli.Flag {
	return &cli.StringFlag{Name: "context", Usage: "kubeconfig context to use"}
}

// clusterClient connects as kubectl would.
func clusterClient(c *cli.Context) (kubernetes.Interface, error) {
	cfg, err := k8s.RESTConfig(c.String("kubeconfig"), c.String("context"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// commandContext is the context of one command: canceled by SIGINT or
// SIGTERM, and at the timeout.
func commandContext(c *cli.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	if timeout <= 0 {
		return ctx, stop
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	return tctx, func() { cancel(); stop() }
}

// interruptible runs f, but returns as soon as ctx ends (a timeout or
// Ctrl-C), with an error naming what was interrupted. f keeps running in
// the background; the command returns without writing anything.
func interruptible(ctx context.Context, what string, f func() error) error {
	if ctx.Err() != nil {
		return ctxError(ctx, what)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctxError(ctx, what)
	}
}

// ctxError explains why ctx ended.
func ctxError(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: --timeout reached", what)
	}
	return fmt.Errorf("%s: interrupted", what)
}

// loadObjects reads the -f paths, giving up when ctx ends.
func loadObjects(ctx context.Context, c *cli.Context) (*input.Objects, []string, error) {
	var objs *input.Objects
	var warnings []string
	if len(c.StringSlice("filename")) == 0 {
		// No files: read the cluster, with kubectl's kubeconfig rules.
		err := interruptible(ctx, "reading the cluster", func() error {
			client, err := clusterClient(c)
			if err != nil {
				return err
			}
			objs, err = k8s.ListObjects(ctx, client)
			return err
		})
		return objs, nil, err
	}
	// Reading allocates about eleven times the file (the decoder's maps,
	// most of them then replaced by shared ones), so at the default GOGC
	// the collector took a quarter of the reading's CPU. Four times the
	// live heap while reading: c1000.yaml (289 MB) reads in a quarter less
	// CPU and 1.2 GB instead of 0.75 GB (docs/performance.md, "Reading").
	// The build runs at the process's setting again.
	defer gcPercentUnlessSet(readGCPercent)()
	err := interruptible(ctx, "loading", func() error {
		var err error
		objs, warnings, err = input.Load(c.StringSlice("filename"), os.Stdin)
		return err
	})
	return objs, warnings, err
}

// readGCPercent is the collector's target while files are read.
const readGCPercent = 400

func runValidate(c *cli.Context) error {
	format := c.String("output")
	if format != "text" && format != "json" {
		return fmt.Errorf("flag --output: %q is not text or json", format)
	}
	timeout, err := timeoutFlag(c)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(c, timeout)
	defer cancel()
	objs, warnings, err := loadObjects(ctx, c)
	if err != nil {
		return err
	}
	if err := input.CheckLimits(objs); err != nil {
		return err
	}
	fs, err := model.Validate(ctx, objs)
	if err != nil {
		return ctxError(ctx, "validating")
	}
	errs, warns := 0, 0
	for _, f := range fs {
		if f.Severity == model.SeverityError {
			errs++
		} else {
			warns++
		}
	}
	// Rendered in memory first: nothing is written when interrupted.
	var out bytes.Buffer
	if format == "json" {
		if fs == nil {
			fs = []model.Finding{}
		}
		b, err := json.MarshalIndent(map[string]any{"slices": len(objs.Slices), "errors": errs, "warnings": warns, "findings": fs}, "", "  ")
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
	} else {
		for _, f := range fs {
			fmt.Fprintln(&out, f)
		}
	}
	if ctx.Err() != nil {
		return ctxError(ctx, "validating")
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	if _, err := os.Stdout.Write(out.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d ResourceSlices: %d errors, %d warnings\n", len(objs.Slices), errs, warns)
	if errs > 0 {
		return fmt.Errorf("validation found %d errors", errs)
	}
	return nil
}
