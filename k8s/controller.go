package k8s

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// RESTConfig loads client configuration as kubectl does: the explicit
// kubeconfig path if given, else $KUBECONFIG, else ~/.kube/config, else the
// in-cluster service account.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "drasat"
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return cfg, nil
}

// Controller runs reconcile passes whenever the cluster changes, batching
// changes for Options.BatchWindow.
type Controller struct {
	Reconciler *Reconciler
	Health     *Health

	broadcaster record.EventBroadcaster
}

// NewController wires informers, the event recorder and the reconciler.
func NewController(client kubernetes.Interface, opts Options, log *zap.Logger, metrics *Metrics, dryRunOut io.Writer) *Controller {
	opts.Defaults()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
	return &Controller{
		Reconciler: &Reconciler{Client: client, Cache: NewCache(client, opts), Opts: opts, Log: log, Metrics: metrics,
			Recorder: rec, DryRunOut: dryRunOut},
		Health:      &Health{},
		broadcaster: b,
	}
}

// Start starts the informers and waits for them to sync.
func (c *Controller) Start(ctx context.Context) error {
	c.Reconciler.Cache.Start(ctx)
	if !c.Reconciler.Cache.WaitForSync(ctx) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	c.Health.SetReady(true)
	return nil
}

// Stop flushes Events and waits for the informers to stop. Call it after
// the context given to Start has ended, or it blocks.
func (c *Controller) Stop() {
	c.broadcaster.Shutdown()
	c.Reconciler.Cache.Shutdown()
}

// Once runs a single pass (drasat reconcile --once).
func (c *Controller) Once(ctx context.Context) (PassResult, error) {
	return c.Reconciler.Pass(ctx)
}

// Run runs passes until ctx ends: a change starts a batch window; when it
// ends (or MaxBatch claims are pending), one pass solves and writes. Claims
// left over (conflicts, more than MaxBatch) are retried right away,
// failures with backoff, and everything pending at least every Resync.
func (c *Controller) Run(ctx context.Context) error {
	r := c.Reconciler
	log := r.Log
	backoff := time.Duration(0)
	resync := time.NewTicker(r.Opts.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.Cache.Changed():
		case <-resync.C:
		}
		// Adaptive batch window (window.go).
		if !c.collect(ctx) {
			return nil
		}
		res, err := r.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.Metrics.PassErrors.Inc()
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			log.Error("pass failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			r.Cache.Trigger()
			continue
		}
		backoff = 0
		if res.Solved > 0 || res.Ungated > 0 {
			log.Info("pass done", zap.Int("pending", res.Pending), zap.Int("solved", res.Solved), zap.Int("allocated", res.Allocated),
				zap.Int("unallocated", res.Unallocated), zap.Int("ungated", res.Ungated), zap.Int("withdrawn", res.Withdrawn), zap.Bool("requeue", res.Requeue))
		}
		if res.Requeue {
			r.Cache.Trigger()
		}
	}
}

// LeaderElection configures RunWithLeaderElection.
type LeaderElection struct {
	Namespace, Name string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
}

// RunWithLeaderElection runs the controller only while this replica holds
// the Lease, so two replicas never write at once. It returns when ctx ends
// (releasing the Lease) or when leadership is lost (an error: the process
// should exit and restart, as other Kubernetes controllers do).
func (c *Controller) RunWithLeaderElection(ctx context.Context, client kubernetes.Interface, le LeaderElection) error {
	r := c.Reconciler
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: r.Opts.Identity})
	if err != nil {
		return err
	}
	var runErr error
	lost := false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            Component,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				r.Metrics.Leader.Set(1)
				r.Log.Info("became leader", zap.String("identity", r.Opts.Identity))
				// Passes run with the leader context: losing the Lease
				// stops writing.
				r.Cache.Trigger()
				runErr = c.Run(lctx)
			},
			OnStoppedLeading: func() {
				r.Metrics.Leader.Set(0)
				if ctx.Err() == nil {
					lost = true
					r.Log.Error("leadership lost")
				}
				cancel()
			},
			OnNewLeader: func(id string) {
				if id != r.Opts.Identity {
					r.Log.Info("following leader", zap.String("leader", id))
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	if lost {
		return fmt.Errorf("leader election lost")
	}
	return runErr
}
