package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/k8s"
	"github.com/drasat/drasat/model"
)

// clusterFlags are shared by `controller` and `reconcile`.
func clusterFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)"},
		&cli.StringFlag{Name: "context", Usage: "kubeconfig context to use"},
		&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: "manage only claims and pods in this namespace (default: all)"},
		&cli.DurationFlag{Name: "batch-window", Value: 2 * time.Second, Usage: "under contention, solve once no claim arrived for this long (see --max-window)"},
		&cli.IntFlag{Name: "max-batch", Value: 0, Usage: "solve at most this many claims together, stand-ins for claims not created yet included (never tried first, then least recently tried); reaching it ends the window early. 0 (default): bounded by the solver's cost (a solve that spends --timeout with a gap halves the next batches) and the passes' time (a pass longer than a third of --stuck-after bounds the next in proportion)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the claims that would be written (YAML on stdout) and write nothing"},
		&cli.StringFlag{Name: "objective", Value: alloc.MaxClaims, Usage: "max-claims or ordered"},
		&cli.BoolFlag{Name: "reserve", Usage: "keep a node for a claim that waited a pass and fits nowhere although the devices it asks for are free, spread over nodes: no other claim goes there until it is allocated"},
		&cli.StringFlag{Name: "policy", Value: alloc.Frag, Usage: "frag (default), binpack or spread: admits what binpack admits, placed to leave the cluster least fragmented for the claims allocated so far"},
		&cli.StringFlag{Name: "compat", Value: model.CompatKEP5963, Usage: "compatibility-group semantics: kep5963 or wildcard"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "solve budget per batch"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		&cli.BoolFlag{Name: "log-console", Usage: "human-readable logs instead of JSON"},
		&cli.StringFlag{Name: "leader-elect-namespace", Value: k8s.DefaultLeaseNamespace, Usage: "namespace of the Lease (in-cluster: the pod's namespace via POD_NAMESPACE)", EnvVars: []string{"POD_NAMESPACE"}},
		&cli.StringFlag{Name: "leader-elect-name", Value: "drasat", Usage: "name of the Lease"},
		&cli.DurationFlag{Name: "leader-elect-lease-duration", Value: 15 * time.Second},
		&cli.DurationFlag{Name: "leader-elect-renew-deadline", Value: 10 * time.Second},
		&cli.DurationFlag{Name: "leader-elect-retry-period", Value: 2 * time.Second},
		&cli.DurationFlag{Name: "stale-after", Value: 5 * time.Minute, Usage: "a gated pod whose claims or templates are still missing this long after its creation no longer holds batches open nor gets stand-ins (a Warning Event ClaimsMissing says so); its claims are allocated once they exist"},
		&cli.DurationFlag{Name: "unused-after", Value: time.Hour, Usage: "withdraw the allocation of a standalone drasat.dev/managed claim that no pod has named or used this long after it was allocated (marked drasat.dev/unallocatable so it is not allocated again until a gated pod uses it or the mark is removed)"},
		&cli.DurationFlag{Name: "ungate-after", Usage: "fallback: remove the gate of a pod still gated this long after its creation, with a Warning Event HandedToScheduler, so the scheduler allocates what drasat has not (0, the default: never)"},
		&cli.StringSliceFlag{Name: "workload-from", Usage: "files of ResourceClaims and Pods of a past period (kubectl get resourceclaims,pods -A -o yaml): the frag look-ahead starts from their claims' shapes (with the pods' CPU under --place-pods-without-claims, and pods without claims labelled drasat.dev/place=true as CPU-only tasks) besides the claims allocated in the cluster when it starts; repeatable"},
		&cli.BoolFlag{Name: "place-pods-without-claims", Value: true, Usage: "choose the node of a gated pod without claims (deploy/'s gating policy gates those labelled drasat.dev/place=true) by the fragmentation measure, where its CPU and memory strand the fewest GPUs, narrow its required node affinity to that node and remove the gate; =false: such a pod is ungated at once and the scheduler places it"},
		&cli.DurationFlag{Name: "write-timeout", Value: k8s.DefaultWriteTimeout, Usage: "bound on each API write; must be less than --leader-elect-lease-duration minus --leader-elect-renew-deadline (a write is only started when it ends before the Lease could pass to another replica)"},
	}, liveFlags()...)
}

// leaderElection reads the Lease flags.
func leaderElection(c *cli.Context) k8s.LeaderElection {
	return k8s.LeaderElection{
		Namespace:     c.String("leader-elect-namespace"),
		Name:          c.String("leader-elect-name"),
		LeaseDuration: c.Duration("leader-elect-lease-duration"),
		RenewDeadline: c.Duration("leader-elect-renew-deadline"),
		RetryPeriod:   c.Duration("leader-elect-retry-period"),
	}
}

func controllerCommand() *cli.Command {
	host, _ := os.Hostname()
	return &cli.Command{
		Name:  "controller",
		Usage: "allocate the cluster's drasat-managed ResourceClaims continuously (see docs/adapter.md)",
		Flags: append(append(clusterFlags(), holdFlags(k8s.DefaultHold)...),
			&cli.StringFlag{Name: "metrics-addr", Value: ":8080", Usage: "serve /metrics, /healthz and /readyz on this address (host:port; empty: off)"},
			&cli.DurationFlag{Name: "stuck-after", Usage: "/healthz fails while a pass has run longer than this (default: 5 x (timeout + 5s), at least 1m)"},
			&cli.BoolFlag{Name: "leader-elect", Value: true, Usage: "run only while holding the Lease (safe with several replicas)"},
			&cli.StringFlag{Name: "identity", Value: host, Usage: "this replica's name in the Lease", EnvVars: []string{"POD_NAME"}},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the whole run to this file when the controller stops, for go tool pprof"},
			&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile to this file when the controller stops (what is live then: the informer caches above all)"},
			&cli.StringFlag{Name: "memory-limit", Usage: "soft limit of the Go runtime's memory, a quantity (1800Mi, 2G): the garbage collector runs more often as it nears it (a container's limit less some room; empty: the GOMEMLIMIT environment variable, else none; docs/adapter.md, Memory)"},
		),
		Action: runController,
	}
}

// holdFlags are --hold with the command's default (the controller holds by
// default, k8s.DefaultHold; reconcile --once does not: it has no later
// pass to decide held claims in) and --hold-idle-per-claim.
func holdFlags(value time.Duration) []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "hold", Value: value, Usage: "under contention, hold claims back for forecast demand, at most this long after a claim is first seen: solve sampled scenarios of the claims to come, learnt from the claims seen, and admit now what they agree on (docs/adapter.md); 0: off"},
		&cli.DurationFlag{Name: "hold-idle-per-claim", Value: hold.DefaultIdlePerClaim, Usage: "what one more claim admitted is worth in idle device time: claims are held only while the claims holding is expected to gain, times this, outweigh the device-seconds the held claims are expected to leave idle (docs/adapter.md); must be positive"},
	}
}

// setup parses the common flags.
// It returns two clients, each with its own rate limiter (--kube-api-qps,
// --kube-api-burst): one for the allocations and gates, one for Events.
func setup(c *cli.Context) (*zap.Logger, kubernetes.Interface, kubernetes.Interface, k8s.Options, error) {
	log, err := k8s.NewLogger(c.String("log-level"), c.Bool("log-console"))
	if err != nil {
		return nil, nil, nil, k8s.Options{}, err
	}
	if _, err := timeoutFlag(c); err != nil {
		return nil, nil, nil, k8s.Options{}, err
	}
	opts := k8s.Options{
		Namespace:    c.String("namespace"),
		BatchWindow:  c.Duration("batch-window"),
		MaxBatch:     c.Int("max-batch"),
		DryRun:       c.Bool("dry-run"),
		Objective:    c.String("objective"),
		Reserve:      c.Bool("reserve"),
		Hold:         c.Duration("hold"),
		HoldIdle:     c.Duration("hold-idle-per-claim"),
		Policy:       c.String("policy"),
		Compat:       c.String("compat"),
		Timeout:      c.Duration("timeout"),
		WriteTimeout: c.Duration("write-timeout"),
		StaleAfter:   c.Duration("stale-after"),
		UnusedAfter:  c.Duration("unused-after"),
		UngateAfter:  c.Duration("ungate-after"),
		PlacePods:    c.Bool("place-pods-without-claims"),
	}
	if files := c.StringSlice("workload-from"); len(files) > 0 {
		if opts.Policy != "" && opts.Policy != alloc.Frag {
			return nil, nil, nil, k8s.Options{}, fmt.Errorf("--workload-from is the frag look-ahead's workload; --policy is %s", opts.Policy)
		}
		if opts.Workload, err = k8s.LoadWorkload(files, opts.PlacePods); err != nil {
			return nil, nil, nil, k8s.Options{}, err
		}
		log.Info("look-ahead workload read", zap.Strings("files", files), zap.Float64("tasks", opts.Workload.Total()), zap.Int("shapes", opts.Workload.Shapes()))
	}
	if opts.HoldIdle <= 0 {
		return nil, nil, nil, k8s.Options{}, fmt.Errorf("--hold-idle-per-claim must be positive (got %s)", opts.HoldIdle)
	}
	if c.IsSet("stuck-after") {
		opts.StuckAfter = c.Duration("stuck-after")
	}
	if c.IsSet("identity") || c.String("identity") != "" {
		opts.Identity = c.String("identity")
	}
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, nil, nil, opts, err
	}
	cfg, err := k8s.RESTConfig(c.String("kubeconfig"), c.String("context"))
	if err != nil {
		return nil, nil, nil, opts, err
	}
	if err := applyLiveFlags(c, cfg, &opts); err != nil {
		return nil, nil, nil, opts, err
	}
	k8s.CountRequests(cfg) // drasat_api_requests_total
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, opts, err
	}
	events, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, opts, err
	}
	return log, client, events, opts, nil
}

func runController(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log, client, events, opts, err := setup(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	// A pass's batch is bounded by the writes that fit in its time (one
	// pass of reconcile --once solves everything pending).
	opts.KubeAPIQPS = c.Float64("kube-api-qps")
	if limit, err := memoryLimit(c.String("memory-limit")); err != nil {
		return err
	} else if limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Info("memory limit", zap.Int64("bytes", limit))
	}
	stopCPU, writeHeap, err := startProfiles(c.String("cpuprofile"), c.String("memprofile"))
	if err != nil {
		return err
	}
	defer stopCPU()
	metrics := k8s.NewMetrics()
	ctl := k8s.NewControllerWithEvents(client, events, opts, log, metrics, os.Stdout)
	if addr := c.String("metrics-addr"); addr != "" {
		bound, err := k8s.Serve(ctx, addr, metrics.Handler(ctl.Health), log)
		if err != nil {
			return fmt.Errorf("metrics address: %w", err)
		}
		log.Info("serving metrics and health", zap.String("addr", bound.String()))
	}
	log.Info("starting", zap.String("identity", opts.Identity), zap.String("namespace", opts.Namespace),
		zap.Duration("batchWindow", opts.BatchWindow), zap.Int("maxBatch", opts.MaxBatch), zap.Bool("dryRun", opts.DryRun))
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // the informers stop, then Stop waits for them
		ctl.Stop()
	}()
	leading := c.Bool("leader-elect") && !opts.DryRun
	if leading {
		// Before anything starts: the Lease timings and the write timeout
		// must fit (fence.go).
		if err := leaderElection(c).Validate(opts.WriteTimeout); err != nil {
			return err
		}
	}
	if err := ctl.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if !leading {
		ctl.Reconciler.Cache.Trigger()
		err = ctl.Run(ctx)
	} else {
		err = ctl.RunWithLeaderElection(ctx, client, leaderElection(c))
	}
	writeHeap() // before the deferred cancel: the caches are still live
	log.Info("stopped")
	return err
}

// memoryLimit parses --memory-limit: bytes, 0 for none.
func memoryLimit(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a quantity of bytes such as 1800Mi or 2G", s)
	}
	return q.Value(), nil
}
