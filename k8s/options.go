package k8s

import (
	"fmt"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/model"
)

// Names drasat uses in the cluster.
const (
	// SchedulingGate on a pod hands its claims to drasat.
	SchedulingGate = "drasat.dev/allocate"
	// ManagedLabel=true on a standalone claim hands it to drasat.
	ManagedLabel = "drasat.dev/managed"
	// UnallocatableAnnotation on a claim holds why drasat could not
	// allocate it in its last attempt; removed when it is allocated.
	UnallocatableAnnotation = "drasat.dev/unallocatable"
	// AllocatedByAnnotation marks claims whose allocation drasat wrote.
	AllocatedByAnnotation = "drasat.dev/allocated-by"
	// Finalizer is the finalizer the scheduler adds before allocating
	// (resourceapi.Finalizer); the resourceclaim controller removes it when
	// the claim is deallocated.
	Finalizer = "resource.kubernetes.io/delete-protection"
	// Component names drasat in Events and in the Lease.
	Component = "drasat"
)

// Options configure the adapter.
type Options struct {
	// Namespace limits which claims and pods drasat manages ("" = all).
	// Allocated claims of all namespaces are always watched, since their
	// devices are in use.
	Namespace string
	// BatchWindow: under contention, a pass waits until no claim arrived for
	// this long (window.go).
	BatchWindow time.Duration
	// MaxBatch bounds the claims solved together (fairness.go); 0 means no
	// bound. Reaching it starts the solve before the window ends.
	MaxBatch int
	// KubeAPIQPS is the rate of the client that writes allocations and
	// removes gates (--kube-api-qps); with it, a batch is bounded by the
	// claims whose writes fit in a pass's time (batch.go). 0: unknown.
	KubeAPIQPS float64
	// DryRun: solve and report, but write nothing.
	DryRun bool

	Objective string        // alloc.MaxClaims or alloc.Ordered
	Policy    string        // alloc.Binpack, alloc.Spread or alloc.Frag
	Compat    string        // model.CompatKEP5963 or model.CompatWildcard
	Timeout   time.Duration // solve budget per batch
	// Reserve keeps a node for a claim that waited a pass and fits nowhere
	// although the devices it asks for are free, spread over nodes
	// (package reserve): no other claim is placed there until it is
	// allocated.
	Reserve bool
	// Hold: hold claims back for forecast demand, at most this long after
	// a claim is first seen (package hold, holding.go); 0: off. drasat
	// controller's default is DefaultHold.
	Hold time.Duration
	// HoldIdle: a pass holds claims only while the claims holding is
	// expected to gain, times HoldIdle, are at least the device-seconds
	// the held claims are expected to leave idle
	// (hold.Options.IdlePerClaim); 0 means hold.DefaultIdlePerClaim.
	HoldIdle time.Duration

	// Identity names this replica (Lease holder, allocated-by annotation).
	Identity string
	// Resync is the informers' resync period and the interval at which
	// pending claims are retried even without events; 0 means 5 minutes.
	Resync time.Duration
	// SettleTimeout bounds how long a pass waits for the informer cache to
	// show its own writes before verifying them and removing gates.
	SettleTimeout time.Duration
	// StuckAfter is how long a pass may run before /healthz fails; 0 means
	// five times the pass's budget (Timeout plus SettleTimeout), at least a
	// minute.
	StuckAfter time.Duration
	// WriteTimeout bounds each API write; 0 means 4 s. With leader
	// election it must be below the lease duration minus the renew
	// deadline (LeaderElection.Validate): a write is only started when it
	// ends before the Lease, as last renewed, could expire (fence.go).
	WriteTimeout time.Duration
	// StaleAfter: a gated pod whose claims are still missing (not created,
	// template absent) this long after its creation stops holding the
	// batch window open and gets no stand-ins, with a Warning Event; 0
	// means 5 minutes (the resourceclaim controller creates claims at
	// about 10 per second, so a burst of 1,000 pods takes under 2).
	StaleAfter time.Duration
	// UnusedAfter: a standalone claim (drasat.dev/managed) whose
	// allocation no pod has used or named this long is withdrawn
	// (unused.go); 0 means an hour.
	UnusedAfter time.Duration
	// UngateAfter: a pod still gated this long after its creation has its
	// gate removed and goes to the scheduler (fallback.go); 0: never.
	UngateAfter time.Duration
	// PlacePods: drasat chooses the node of a gated pod without claims
	// by the fragmentation measure and ungates it pinned there
	// (claimless.go); off: such a pod is ungated at once. drasat
	// controller turns it on unless --place-pods-without-claims=false.
	PlacePods bool
	// Workload: the frag look-ahead's workload to start from (a record of
	// past claims, LoadWorkload), besides the tasks running at the first
	// pass; the reconciler adds what it learns to it. nil: those alone.
	Workload *frag.Workload

	LiveOptions // write workers, adaptive window (writer.go, window.go)
}

// Defaults fills unset fields.
// DefaultHold is drasat controller's --hold. Claims compete as long as
// they keep arriving, and a hold shorter than that admits large claims
// whose room smaller, later ones would have used: the load test's 1,000
// pods arrive over up to 200 s (docs/adapter.md, "Holding capacity for
// forecast demand"). Options.Defaults leaves Hold as it is: 0 is off.
const DefaultHold = 200 * time.Second

func (o *Options) Defaults() {
	if o.BatchWindow == 0 {
		o.BatchWindow = 2 * time.Second
	}
	if o.Objective == "" {
		o.Objective = alloc.MaxClaims
	}
	if o.Policy == "" {
		// A controller lives through the cluster's whole workload: it
		// learns the claims' shapes and places for the next ones
		// (docs/history/performance.md, "Over the life of a cluster").
		o.Policy = alloc.Frag
	}
	if o.Compat == "" {
		o.Compat = model.CompatKEP5963
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Identity == "" {
		o.Identity = Component
	}
	if o.Resync == 0 {
		o.Resync = 5 * time.Minute
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 5 * time.Second
	}
	if o.UnusedAfter == 0 {
		o.UnusedAfter = time.Hour
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = 5 * time.Minute
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = max(5*(o.Timeout+o.SettleTimeout), time.Minute)
	}
	o.LiveOptions.defaults(o.BatchWindow)
}

// Validate reports bad option values.
func (o *Options) Validate() error {
	if err := alloc.CheckOptions(o.Objective, o.Policy); err != nil {
		return err
	}
	if err := model.CheckCompat(o.Compat); err != nil {
		return err
	}
	if o.BatchWindow < 0 || o.MaxBatch < 0 || o.Timeout < 0 || o.StuckAfter < 0 || o.Hold < 0 || o.HoldIdle < 0 || o.WriteTimeout < 0 || o.StaleAfter < 0 || o.UnusedAfter < 0 || o.UngateAfter < 0 {
		return fmt.Errorf("batch window, max batch, timeout, stuck-after, hold, hold idle per claim and write timeout must not be negative")
	}
	return nil
}
