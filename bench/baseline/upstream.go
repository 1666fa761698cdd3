package baseline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The upstream baseline drives k8s.io/dynamic-resource-allocation/structured,
// the allocator inside the kube-scheduler's DynamicResources plugin, the way
// the plugin does (pkg/scheduler/framework/plugins/dynamicresources):
//
//   - PreFilter, once per pod: the allocated state is gathered from all
//     allocated claims (allocateddevices.go, foreachAllocatedDevice:
//     admin-access results are skipped; with DRAConsumableCapacity, results
//     with a shareID go to AllocatedSharedDeviceIDs and AggregatedCapacity,
//     the rest to AllocatedDevices), and a fresh allocator is made with
//     structured.NewAllocator(ctx, AllocatorFeatures(fts), allocatedState,
//     classLister, slices, celCache). A fresh one matters: the allocator
//     caches the counters left by the allocated state per pool.
//   - Filter, once per node: Allocate(ctx, node, claims) under a
//     context.WithTimeout of the plugin's filterTimeout (10s by default,
//     feature DRASchedulerFilterTimeout). DeadlineExceeded and
//     ErrFailedAllocationOnNode make the node unschedulable; any other error
//     aborts the pod's scheduling attempt; fewer results than claims means
//     the node does not fit.
//   - Reserve/PreBind: the allocation of the chosen node is written into
//     status.allocation and the claim is treated as allocated from then on.
//
// Here each pending claim stands for one pod with that one claim, in input
// (arrival) order; nodes are tried in name order and the first that fits
// wins (the scheduler filters all nodes and scores; the DRA score only
// prefers earlier firstAvailable subrequests, so first fit is the
// arrival-order baseline the benchmark asks for).

// DefaultUpstreamTimeout is the scheduler's default DynamicResources filter
// timeout (DynamicResourcesArgs.filterTimeout).
const DefaultUpstreamTimeout = 10 * time.Second

// DefaultUpstreamAllocatorFeatures is what the kube-scheduler 1.37 passes to
// structured.NewAllocator with default feature gates (AllocatorFeatures in
// dynamicresources.go): DRAAdminAccess (GA), DRAPrioritizedList (GA),
// DRAPartitionableDevices (beta, on), DRADeviceTaints (GA),
// DRADeviceBindingConditions+DRAResourceClaimDeviceStatus (beta, on),
// DRAConsumableCapacity (beta, on) and DRAFractionalCapacityRange (beta, on).
// The alpha gates DRADeviceCompatibilityGroups, DRADerivedAttributes,
// DRAListTypeAttributes and DRAOptionalNodeOperations are off. This set
// selects the "incubating" implementation.
func DefaultUpstreamAllocatorFeatures() structured.Features {
	return structured.Features{
		AdminAccess:             true,
		PrioritizedList:         true,
		PartitionableDevices:    true,
		DeviceTaints:            true,
		DeviceBindingAndStatus:  true,
		ConsumableCapacity:      true,
		FractionalCapacityRange: true,
	}
}

// UpstreamFeatures configures the upstream baseline.
type UpstreamFeatures struct {
	// Allocator, when non-nil, replaces DefaultUpstreamAllocatorFeatures.
	Allocator *structured.Features
	// CompatibilityGroups turns on DRADeviceCompatibilityGroups (KEP-5963,
	// alpha in 1.37), which selects the "experimental" implementation.
	// Without it the allocator ignores every slice that declares
	// compatibility groups (and so its whole pool). UpstreamFeaturesFor
	// sets it when the input needs it.
	CompatibilityGroups bool
	// Timeout bounds one Allocate call (one claim on one node), as the
	// scheduler's filterTimeout does. 0 means DefaultUpstreamTimeout; a
	// negative value means no limit.
	Timeout time.Duration
	// forgetFailures turns off the memo of failed nodes (failures.go), for
	// the test that compares the answers with and without it.
	forgetFailures bool
	// ClaimTimeout, when positive, bounds all Allocate calls for one claim
	// together (the scheduler filters nodes in parallel, so its wall time per
	// pod is about one Timeout; here nodes are tried one after the other).
	ClaimTimeout time.Duration
}

// UpstreamFeaturesFor returns the default configuration, with
// CompatibilityGroups on when some slice of objs declares compatibility
// groups.
func UpstreamFeaturesFor(objs *input.Objects) UpstreamFeatures {
	var f UpstreamFeatures
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			for _, cc := range s.Spec.Devices[i].ConsumesCounters {
				if len(cc.CompatibilityGroups) > 0 {
					f.CompatibilityGroups = true
				}
			}
		}
	}
	return f
}

// AllocatorFeatures is the feature set passed to structured.NewAllocator.
func (f UpstreamFeatures) AllocatorFeatures() structured.Features {
	feats := DefaultUpstreamAllocatorFeatures()
	if f.Allocator != nil {
		feats = *f.Allocator
	}
	if f.CompatibilityGroups {
		feats.CompatibilityGroups = true
	}
	return feats
}

// UpstreamRejection is a pending claim the upstream allocator did not allocate.
type UpstreamRejection struct {
	Key    string // namespace/name
	Reason string
	// TimedOut is set when at least one node was given up on because the
	// allocator hit its timeout.
	TimedOut bool
}

// UpstreamResult is the outcome of one upstream run.
type UpstreamResult struct {
	// Allocated are deep copies of the pending claims that got an
	// allocation, with status.allocation set, in input order.
	Allocated []*resourceapi.ResourceClaim
	// Rejected are the pending claims left unallocated, in input order.
	Rejected []UpstreamRejection
	// Wall is the wall time of the whole run.
	Wall time.Duration
	// Implementation is the allocator implementation NewAllocator picked:
	// "stable", "incubating" or "experimental".
	Implementation string
	Features       structured.Features
	Nodes          int // nodes tried per claim (before pod pinning)
	AllocateCalls  int // Allocate calls made
	Timeouts       int // Allocate calls that hit Timeout or ClaimTimeout
	// AllocateOneCalls sums the allocator's search steps (its
	// NumAllocateOneInvocations statistic), when the implementation reports it.
	AllocateOneCalls int64
	// KnownFailures counts the nodes skipped for a claim because a claim of
	// the same spec had already failed there (failures.go).
	KnownFailures int
}

// Admitted returns the number of pending claims allocated.
func (r *UpstreamResult) Admitted() int { return len(r.Allocated) }

// Upstream allocates the pending claims of objs (those without
// status.allocation) with the kube-scheduler's allocator, one claim at a
// time in input order. Claims that already have an allocation are in use
// from the start. objs is not modified. The error is only for a cancelled
// ctx or unusable input; claims that cannot be allocated are in Rejected.
func Upstream(ctx context.Context, objs *input.Objects, feats UpstreamFeatures) (*UpstreamResult, error) {
	start := time.Now()
	features := feats.AllocatorFeatures()
	timeout := feats.Timeout
	if timeout == 0 {
		timeout = DefaultUpstreamTimeout
	}
	res := &UpstreamResult{Features: features}

	classes, err := newClassLister(objs.Classes)
	if err != nil {
		return nil, err
	}
	// Like the plugin: an LRU of 10 compiled expressions, shared by all
	// scheduling cycles.
	celCache := dracel.NewCache(10, dracel.Features{
		EnableConsumableCapacity: features.ConsumableCapacity,
		EnableListTypeAttributes: features.ListTypeAttributes,
	})
	nodes := upstreamNodes(objs)
	res.Nodes = len(nodes)
	nodeByName := map[string]*corev1.Node{}
	for _, n := range nodes {
		nodeByName[n.Name] = n
	}
	pinned := objs.PinnedNodes()

	pods := newUpstreamPods(objs)
	failed := newFailures(!feats.forgetFailures)
	state := newAllocatedState(features.ConsumableCapacity)
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			state.add(c.Status.Allocation)
		}
	}

	// The scheduler's ResourceSlice tracker adds DeviceTaintRules' taints
	// to the slices the allocator sees.
	slices := input.ApplyTaintRules(objs.Slices, objs.TaintRules)
	for _, claim := range objs.Claims {
		if claim.Status.Allocation != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := claim.Namespace + "/" + claim.Name
		tryNodes := nodes
		if name, ok := pinned[key]; ok {
			n, known := nodeByName[name]
			if !known {
				res.Rejected = append(res.Rejected, UpstreamRejection{Key: key, Reason: fmt.Sprintf("reserved for a pod on node %s, which is not known", name)})
				continue
			}
			tryNodes = []*corev1.Node{n}
		}
		tryNodes, why := pods.filter(key, tryNodes)
		if why != "" {
			res.Rejected = append(res.Rejected, UpstreamRejection{Key: key, Reason: why})
			continue
		}
		result, rej, err := allocateOne(ctx, res, features, state, classes, slices, celCache, claim, tryNodes, timeout, feats.ClaimTimeout, failed)
		if err != nil {
			return nil, err
		}
		if result == nil {
			rej.Key = key
			res.Rejected = append(res.Rejected, rej)
			continue
		}
		pods.place(key, result, tryNodes)
		out := claim.DeepCopy()
		out.Status.Allocation = result
		res.Allocated = append(res.Allocated, out)
		state.add(result)
	}
	res.Wall = time.Since(start)
	return res, nil
}

// allocateOne runs one scheduling cycle for a pod with just this claim.
func allocateOne(ctx context.Context, res *UpstreamResult, features structured.Features, state *allocatedState,
	classes *classLister, slices []*resourceapi.ResourceSlice, celCache *dracel.Cache,
	claim *resourceapi.ResourceClaim, nodes []*corev1.Node, timeout, claimTimeout time.Duration, failed *failures,
) (*resourceapi.AllocationResult, UpstreamRejection, error) {
	var rej UpstreamRejection
	// PreFilter: a missing class makes the pod unschedulable before any
	// node is looked at.
	for _, r := range claim.Spec.Devices.Requests {
		names := []string{}
		if r.Exactly != nil {
			names = append(names, r.Exactly.DeviceClassName)
		}
		for _, s := range r.FirstAvailable {
			names = append(names, s.DeviceClassName)
		}
		for _, n := range names {
			if _, err := classes.Get(n); err != nil {
				rej.Reason = fmt.Sprintf("request %s: device class %s does not exist", r.Name, n)
				return nil, rej, nil
			}
		}
	}
	if len(nodes) == 0 {
		rej.Reason = "no nodes"
		return nil, rej, nil
	}
	allocator, err := structured.NewAllocator(ctx, features, state.snapshot(), classes, slices, celCache)
	if err != nil {
		return nil, rej, fmt.Errorf("create allocator: %w", err)
	}
	if res.Implementation == "" {
		res.Implementation = implementationName(allocator)
	}
	defer func() { res.AllocateOneCalls += allocateOneCalls(allocator) }()

	claimCtx := ctx
	if claimTimeout > 0 {
		c, cancel := context.WithTimeout(ctx, claimTimeout)
		defer cancel()
		claimCtx = c
	}
	claims := []*resourceapi.ResourceClaim{claim}
	known, err := failed.forSpec(claim)
	if err != nil {
		return nil, rej, err
	}
	var failures []string
	// fails records that node cannot take the claim (in the memo too,
	// when it is on).
	fails := func(node, why string) {
		if known != nil {
			known[node] = why
		}
		failures = append(failures, why)
	}
	for _, node := range nodes {
		if claimCtx.Err() != nil {
			break
		}
		if why, ok := known[node.Name]; ok {
			res.KnownFailures++
			failures = append(failures, why)
			continue
		}
		results, err := allocateOnNode(claimCtx, allocator, node, claims, timeout)
		res.AllocateCalls++
		switch {
		case ctx.Err() != nil:
			return nil, rej, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Not a proof that the node cannot fit: not remembered.
			res.Timeouts++
			rej.TimedOut = true
			failures = append(failures, fmt.Sprintf("node %s: timed out trying to allocate devices", node.Name))
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			fails(node.Name, fmt.Sprintf("node %s: %v", node.Name, err))
		case err != nil:
			// The scheduler aborts the pod's scheduling attempt.
			rej.Reason = err.Error()
			return nil, rej, nil
		case len(results) == len(claims):
			return &results[0], rej, nil
		default:
			fails(node.Name, fmt.Sprintf("node %s: %d of %d claims allocated", node.Name, len(results), len(claims)))
		}
	}
	if claimCtx.Err() != nil && ctx.Err() == nil {
		rej.TimedOut = true
		failures = append(failures, "claim timeout reached")
	}
	rej.Reason = fmt.Sprintf("cannot allocate all claims on any of %d nodes", len(nodes))
	if len(failures) > 0 {
		const maxShown = 3
		shown := failures
		if len(shown) > maxShown {
			shown = append(shown[:maxShown:maxShown], fmt.Sprintf("%d more", len(failures)-maxShown))
		}
		rej.Reason += " (" + strings.Join(shown, "; ") + ")"
	}
	return nil, rej, nil
}

// allocateOnNode is the Filter call: Allocate under the filter timeout.
func allocateOnNode(ctx context.Context, allocator structured.Allocator, node *corev1.Node,
	claims []*resourceapi.ResourceClaim, timeout time.Duration,
) ([]resourceapi.AllocationResult, error) {
	if timeout > 0 {
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ctx = c
	}
	return allocator.Allocate(ctx, node, claims)
}

// upstreamNodes are the Node objects, or nodes synthesised from the names
// slices and devices use when there are none, in name order. With no node
// known at all a single nameless node stands in, on which only devices
// available on all nodes can be allocated (as in the model).
func upstreamNodes(objs *input.Objects) []*corev1.Node {
	var nodes []*corev1.Node
	if len(objs.Nodes) > 0 {
		nodes = append(nodes, objs.Nodes...)
	} else {
		seen := map[string]bool{}
		add := func(name *string) {
			if name != nil && *name != "" && !seen[*name] {
				seen[*name] = true
				nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *name}})
			}
		}
		for _, s := range objs.Slices {
			add(s.Spec.NodeName)
			for i := range s.Spec.Devices {
				add(s.Spec.Devices[i].NodeName)
			}
		}
		if len(nodes) == 0 {
			nodes = append(nodes, &corev1.Node{})
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes
}

// allocatedState is the plugin's allocatedDevices bookkeeping.
type allocatedState struct {
	consumableCapacity bool
	devices            sets.Set[structured.DeviceID]
	shared             sets.Set[structured.SharedDeviceID]
	capacity           structured.ConsumedCapacityCollection
}

func newAllocatedState(consumableCapacity bool) *allocatedState {
	return &allocatedState{
		consumableCapacity: consumableCapacity,
		devices:            sets.New[structured.DeviceID](),
		shared:             sets.New[structured.SharedDeviceID](),
		capacity:           structured.NewConsumedCapacityCollection(),
	}
}

// add records an allocation like foreachAllocatedDevice.
func (s *allocatedState) add(a *resourceapi.AllocationResult) {
	for _, r := range a.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue // not considered allocated
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if s.consumableCapacity && r.ShareID != nil {
			s.shared.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				s.capacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		s.devices.Insert(id)
	}
}

// snapshot is a copy for one allocator, as the plugin hands out clones.
func (s *allocatedState) snapshot() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         s.devices.Clone(),
		AllocatedSharedDeviceIDs: s.shared.Clone(),
		AggregatedCapacity:       s.capacity.Clone(),
	}
}

// classLister is a structured.DeviceClassLister over a fixed list.
type classLister struct {
	list   []*resourceapi.DeviceClass
	byName map[string]*resourceapi.DeviceClass
}

var _ structured.DeviceClassLister = (*classLister)(nil)

func newClassLister(classes []*resourceapi.DeviceClass) (*classLister, error) {
	l := &classLister{byName: map[string]*resourceapi.DeviceClass{}}
	for _, c := range classes {
		if _, dup := l.byName[c.Name]; dup {
			return nil, fmt.Errorf("DeviceClass %s given twice", c.Name)
		}
		l.byName[c.Name] = c
		l.list = append(l.list, c)
	}
	return l, nil
}

func (l *classLister) List() ([]*resourceapi.DeviceClass, error) { return l.list, nil }

func (l *classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.byName[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// implementationName reads the implementation from the allocator's package
// ("*incubating.Allocator"); the channel type itself is internal.
func implementationName(a structured.Allocator) string {
	name := fmt.Sprintf("%T", a)
	name = strings.TrimPrefix(name, "*")
	if i := strings.Index(name, "."); i >= 0 {
		name = name[:i]
	}
	return name
}

// allocateOneCalls reads GetStats().NumAllocateOneInvocations, which the
// incubating and experimental implementations offer through an internal
// type, by reflection; 0 when not available.
func allocateOneCalls(a structured.Allocator) int64 {
	m := reflect.ValueOf(a).MethodByName("GetStats")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return 0
	}
	out := m.Call(nil)[0]
	if out.Kind() != reflect.Struct {
		return 0
	}
	f := out.FieldByName("NumAllocateOneInvocations")
	if !f.IsValid() || f.Kind() != reflect.Int64 {
		return 0
	}
	return f.Int()
}
