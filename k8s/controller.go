package k8s

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return NewControllerWithEvents(client, client, opts, log, metrics, dryRunOut)
}

// NewControllerWithEvents is NewController with Events written through
// their own client: with a rate limiter of their own (as the
// kube-scheduler's), the Events for every allocation and removed gate do
// not take the allocations' and gates' share of the client's QPS.
func NewControllerWithEvents(client, events kubernetes.Interface, opts Options, log *zap.Logger, metrics *Metrics, dryRunOut io.Writer) *Controller {
	opts.Defaults()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
	r := &Reconciler{Client: client, Cache: NewCache(client, opts), Opts: opts, Log: log, Metrics: metrics,
		Recorder: rec, DryRunOut: dryRunOut}
	r.Cache.ClaimUpdated = r.claimUpdated
	return &Controller{
		Reconciler:  r,
		Health:      &Health{StuckAfter: opts.StuckAfter},
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

// Once runs a single pass (drasat reconcile --once). It writes every
// allocation it solves, however long that takes.
func (c *Controller) Once(ctx context.Context) (PassResult, error) {
	c.Reconciler.oneShot = true
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
	var recheck *time.Timer
	defer func() {
		if recheck != nil {
			recheck.Stop()
		}
	}()
	for {
		if ctx.Err() != nil {
			return nil
		}
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
		if ctx.Err() != nil {
			return nil
		}
		c.Health.PassStarted()
		passStart := time.Now()
		res, err := r.Pass(ctx)
		took := time.Since(passStart)
		r.Metrics.PassSeconds.Observe(took.Seconds())
		c.Health.PassEnded()
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
				zap.Int("unallocated", res.Unallocated), zap.Int("ungated", res.Ungated), zap.Int("withdrawn", res.Withdrawn), zap.Int("deferred", res.Deferred), zap.Bool("requeue", res.Requeue), zap.Duration("took", took))
		}
		if res.Requeue {
			r.Cache.Trigger()
		}
		if res.Held > 0 {
			// Held claims are decided again at their recheck time at the
			// latest (holding.go).
			if recheck != nil {
				recheck.Stop()
			}
			recheck = time.AfterFunc(time.Until(r.holdRecheck), r.Cache.Trigger)
		}
	}
}

// LeaderElection configures RunWithLeaderElection and RunLeading.
type LeaderElection struct {
	Namespace, Name string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
}

// DefaultLeaseNamespace is the namespace of deploy/ (and of its Role for
// Leases): the Lease lives there when $POD_NAMESPACE is unset.
const DefaultLeaseNamespace = "drasat-system"

// RunWithLeaderElection runs the controller only while this replica holds
// the Lease, so two replicas never write at once. It returns when ctx ends
// (after the write in flight, then releasing the Lease) or when leadership
// is lost (an error: the process should exit and restart, as other
// Kubernetes controllers do).
func (c *Controller) RunWithLeaderElection(ctx context.Context, client kubernetes.Interface, le LeaderElection) error {
	c.Reconciler.Cache.Trigger()
	return c.RunLeading(ctx, client, le, c.Run)
}

// RunLeading waits for the Lease, then runs fn with a context that ends
// when ctx ends or the Lease is lost. Only after fn has returned (the write
// in flight finished) is the Lease released, so a successor never writes
// while this replica still does. It fails early, with a message naming the
// Lease, when this identity may not take the Lease.
func (c *Controller) RunLeading(ctx context.Context, client kubernetes.Interface, le LeaderElection, fn func(context.Context) error) error {
	r := c.Reconciler
	if err := le.Validate(r.Opts.WriteTimeout); err != nil {
		return err
	}
	if err := CanTakeLease(ctx, client, le.Namespace, le.Name); err != nil {
		return err
	}
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: r.Opts.Identity})
	if err != nil {
		return err
	}
	// Every write is admitted by the fence, which follows the Lease's
	// renewals (fence.go).
	f := newFence(le.LeaseDuration, r.Opts.WriteTimeout)
	r.fence = f
	lock := &fencedLock{Interface: inner, fence: f}
	// The elector runs on its own context: cancelling it releases the
	// Lease, which must wait until fn has returned.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu      sync.Mutex
		fnErr   error
		started bool
		lost    atomic.Bool
	)
	fnDone := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            Component,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				started = true
				mu.Unlock()
				defer close(fnDone)
				r.Metrics.Leader.Set(1)
				r.Log.Info("became leader", zap.String("identity", r.Opts.Identity), zap.String("lease", le.Namespace+"/"+le.Name))
				// fn stops on shutdown or when the Lease is lost.
				fctx, cancel := context.WithCancel(lctx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				err := fn(fctx)
				mu.Lock()
				fnErr = err
				mu.Unlock()
				// Done (reconcile --once) or shutting down: give up the
				// Lease now that nothing is in flight.
				stopElecting()
			},
			OnStoppedLeading: func() {
				f.close()
				r.Metrics.Leader.Set(0)
				mu.Lock()
				wasLeader := started
				mu.Unlock()
				if wasLeader && ctx.Err() == nil && electCtx.Err() == nil {
					lost.Store(true)
					r.Log.Error("leadership lost", zap.String("lease", le.Namespace+"/"+le.Name))
				}
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
	// Shutdown before leading: stop waiting for the Lease.
	stopWaiting := context.AfterFunc(ctx, func() {
		mu.Lock()
		leading := started
		mu.Unlock()
		if !leading {
			stopElecting()
		}
	})
	defer stopWaiting()
	// A pass stuck past --stuck-after gives the Lease up at once (after
	// the writes in flight, which the fence bounds) instead of holding
	// it until the liveness probe restarts the process and the Lease
	// then expires: the standby takes over, and the stuck pass can write
	// nothing more.
	var stuck atomic.Bool
	if c.Health != nil && c.Health.StuckAfter > 0 {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-electCtx.Done():
					return
				case <-t.C:
				}
				if d, ok := c.Health.Stuck(); ok {
					stuck.Store(true)
					r.Log.Error("pass stuck; giving up the Lease", zap.Duration("running", d), zap.String("lease", le.Namespace+"/"+le.Name))
					f.close()
					stopElecting()
					return
				}
			}
		}()
	}
	elector.Run(electCtx)
	if stuck.Load() {
		// The stuck pass may never return; the fence keeps it from
		// writing, and the process exits.
		return fmt.Errorf("a pass ran longer than %s: gave up the Lease %s/%s", c.Health.StuckAfter, le.Namespace, le.Name)
	}
	mu.Lock()
	leading := started
	mu.Unlock()
	if leading {
		<-fnDone // the write in flight, after a lost Lease
		r.Log.Info("leadership released", zap.String("identity", r.Opts.Identity), zap.String("lease", le.Namespace+"/"+le.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	if lost.Load() {
		return fmt.Errorf("leader election lost (Lease %s/%s)", le.Namespace, le.Name)
	}
	return fnErr
}

// Validate checks the Lease timings against each other and the write
// timeout: a leader stops renewing at the latest RenewDeadline after its
// last renewal, and others may take the Lease LeaseDuration after it, so a
// write started near the renew deadline must end within the difference.
func (le LeaderElection) Validate(writeTimeout time.Duration) error {
	switch {
	case le.LeaseDuration <= 0 || le.RenewDeadline <= 0 || le.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period must be positive")
	case le.RenewDeadline >= le.LeaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be less than --leader-elect-lease-duration (%s)", le.RenewDeadline, le.LeaseDuration)
	case le.RetryPeriod >= le.RenewDeadline:
		return fmt.Errorf("--leader-elect-retry-period (%s) must be less than --leader-elect-renew-deadline (%s)", le.RetryPeriod, le.RenewDeadline)
	case writeTimeout >= le.LeaseDuration-le.RenewDeadline:
		return fmt.Errorf("--write-timeout (%s) must be less than --leader-elect-lease-duration minus --leader-elect-renew-deadline (%s - %s = %s): a write started just before the leader gives up must end before another replica may take the Lease",
			writeTimeout, le.LeaseDuration, le.RenewDeadline, le.LeaseDuration-le.RenewDeadline)
	}
	return nil
}

// CanTakeLease asks the API server whether this identity may get, create
// and update the Lease, so a wrong namespace or missing RBAC fails at once
// with a message instead of retrying silently forever.
func CanTakeLease(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	for _, verb := range []string{"get", "create", "update"} {
		rev, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("Lease %s/%s: checking access: %w", namespace, name, err)
		}
		if !rev.Status.Allowed {
			return fmt.Errorf("Lease %s/%s: this identity may not %s it (set --leader-elect-namespace or $POD_NAMESPACE to the namespace whose Role grants Leases; deploy/ uses %s)",
				namespace, name, verb, DefaultLeaseNamespace)
		}
	}
	return nil
}

// LeaseHeld reports the holder of a Lease that is held by someone else and
// not expired ("" when free, expired or held by identity).
func LeaseHeld(ctx context.Context, client kubernetes.Interface, namespace, name, identity string) (string, error) {
	l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("Lease %s/%s: %w", namespace, name, err)
	}
	h := l.Spec.HolderIdentity
	if h == nil || *h == "" || *h == identity || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return "", nil
	}
	if time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
		return "", nil
	}
	return *h, nil
}
