package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/drasat/drasat/k8s"
)

func reconcileCommand() *cli.Command {
	return &cli.Command{
		Name:  "reconcile",
		Usage: "allocate the cluster's drasat-managed pending ResourceClaims once, then exit (see docs/adapter.md)",
		Flags: append(append(clusterFlags(), holdFlags(0)...),
			&cli.BoolFlag{Name: "once", Value: true, Usage: "run one pass and exit (the only mode; for a loop use `drasat controller`)"},
			&cli.StringFlag{Name: "identity", Usage: "this run's name in the Lease and in drasat.dev/allocated-by (default: drasat-reconcile-<host>-<pid>-<random>, unique, so that two concurrent runs never both believe they hold the Lease)"},
		),
		Action: runReconcile,
	}
}

func runReconcile(c *cli.Context) error {
	if !c.Bool("once") {
		return fmt.Errorf("reconcile runs once; use `drasat controller` to keep running")
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !c.IsSet("identity") {
		id, err := uniqueIdentity("drasat-reconcile")
		if err != nil {
			return err
		}
		if err := c.Set("identity", id); err != nil {
			return err
		}
	}
	log, client, events, opts, err := setup(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	if !opts.DryRun {
		if err := leaderElection(c).Validate(opts.WriteTimeout); err != nil {
			return err
		}
	}
	ctl := k8s.NewControllerWithEvents(client, events, opts, log, k8s.NewMetrics(), os.Stdout)
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // the informers stop, then Stop waits for them
		ctl.Stop()
	}()
	if err := ctl.Start(ctx); err != nil {
		return err
	}
	var res k8s.PassResult
	once := func(ctx context.Context) error {
		var err error
		res, err = ctl.Once(ctx)
		return err
	}
	if opts.DryRun {
		err = once(ctx)
	} else {
		// Never a second writer: take the controller's Lease for the pass,
		// and refuse while a controller holds it.
		le := leaderElection(c)
		holder, herr := k8s.LeaseHeld(ctx, client, le.Namespace, le.Name, opts.Identity)
		if herr != nil {
			return herr
		}
		if holder != "" {
			return fmt.Errorf("Lease %s/%s is held by %s: a controller or another reconcile run is writing; stop it, or use --dry-run", le.Namespace, le.Name, holder)
		}
		err = ctl.RunLeading(ctx, client, le, once)
	}
	if err != nil {
		return err
	}
	verb := "allocated"
	if opts.DryRun {
		verb = "would allocate"
	}
	fmt.Fprintf(os.Stderr, "%s %d of %d claims solved (%d pending); %d pods ungated; %d unallocatable\n",
		verb, res.Allocated, res.Solved, res.Pending, res.Ungated, res.Unallocated)
	log.Debug("reconcile done", zap.Any("result", res))
	return nil
}

// uniqueIdentity names one run: prefix, host, process id and a random
// suffix, so that no two runs share a Lease holder identity (client-go
// treats a Lease held under its own identity as its own).
func uniqueIdentity(prefix string) (string, error) {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	id := fmt.Sprintf("%s-%s-%d-%s", prefix, host, os.Getpid(), hex.EncodeToString(b))
	// A Lease's holderIdentity and an annotation value have no length
	// limit that matters here, but keep it readable.
	if len(id) > 128 {
		id = id[:128]
	}
	return id, nil
}
