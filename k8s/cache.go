package k8s

import (
	"context"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
)

// Cache holds the informers drasat reads: ResourceClaims, ResourceSlices,
// DeviceClasses and Nodes cluster-wide, Pods and ResourceClaimTemplates in
// the managed namespace (or all). Changes that can affect an allocation are signalled on Changed.
type Cache struct {
	factory, podFactory informers.SharedInformerFactory

	Claims  resourcelisters.ResourceClaimLister
	Slices  resourcelisters.ResourceSliceLister
	Classes resourcelisters.DeviceClassLister
	Nodes   corelisters.NodeLister
	Pods    corelisters.PodLister
	// TaintRules: DeviceTaintRules, whose taints apply to the devices they
	// select (model.ApplyTaintRules), as in the scheduler.
	TaintRules resourcelisters.DeviceTaintRuleLister
	// Templates: ResourceClaimTemplates in the managed namespace(s), so
	// the claims gated pods will get can be counted before the
	// resourceclaim controller has created them (projection.go).
	Templates resourcelisters.ResourceClaimTemplateLister
	// ClaimUpdated, when set before Start, sees every claim update.
	ClaimUpdated func(old, cur *resourceapi.ResourceClaim)

	synced  []cache.InformerSynced
	changed chan struct{}

	// The kinds whose objects are the cluster's size and change rarely
	// are kept sorted between snapshots (kept.go): listed and sorted
	// again only after an event of their informer.
	slices, classes, nodes, taintRules, templates keptList
	// derived: what is computed from the kept kinds alone, for the
	// generations it was computed at (kept.go).
	derivedMu sync.Mutex
	derived   *inventoryDerived
}

// NewCache creates (but does not start) the informers.
func NewCache(client kubernetes.Interface, opts Options) *Cache {
	c := &Cache{changed: make(chan struct{}, 1)}
	c.factory = informers.NewSharedInformerFactoryWithOptions(client, opts.Resync, informers.WithTransform(sliceTransform()))
	c.podFactory = informers.NewSharedInformerFactoryWithOptions(client, opts.Resync, informers.WithNamespace(opts.Namespace), informers.WithTransform(stripUnread))

	claims := c.factory.Resource().V1().ResourceClaims()
	slices := c.factory.Resource().V1().ResourceSlices()
	classes := c.factory.Resource().V1().DeviceClasses()
	nodes := c.factory.Core().V1().Nodes()
	pods := c.podFactory.Core().V1().Pods()
	taintRules := c.factory.Resource().V1().DeviceTaintRules()
	templates := c.podFactory.Resource().V1().ResourceClaimTemplates()
	c.Templates = templates.Lister()
	c.Claims, c.Slices, c.Classes, c.Nodes, c.Pods = claims.Lister(), slices.Lister(), classes.Lister(), nodes.Lister(), pods.Lister()
	c.TaintRules = taintRules.Lister()

	all := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.signal() },
		UpdateFunc: func(any, any) { c.signal() },
		DeleteFunc: func(any) { c.signal() },
	}
	// kept: every event of a kept kind makes its sorted list stale, then
	// signals as all does.
	kept := func(k *keptList) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { k.changed(); c.signal() },
			UpdateFunc: func(any, any) { k.changed(); c.signal() },
			DeleteFunc: func(any) { k.changed(); c.signal() },
		}
	}
	claimH := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.signal() },
		UpdateFunc: func(o, n any) {
			oc, ok1 := o.(*resourceapi.ResourceClaim)
			nc, ok2 := n.(*resourceapi.ResourceClaim)
			if ok1 && ok2 && c.ClaimUpdated != nil {
				c.ClaimUpdated(oc, nc)
			}
			c.signal()
		},
		DeleteFunc: func(any) { c.signal() },
	}
	// Nodes: only additions, deletions and changes of labels, cordon,
	// taints and allocatable matter (status heartbeats do not).
	// Every node event makes the kept node list stale (it holds the
	// objects, heartbeats included).
	nodeH := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.nodes.changed(); c.signal() },
		UpdateFunc: func(o, n any) {
			c.nodes.changed()
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if !ok1 || !ok2 || nodeChanged(on, nn) {
				c.signal()
			}
		},
		DeleteFunc: func(any) { c.nodes.changed(); c.signal() },
	}
	// Pods: only gated pods and pods that use claims matter.
	podH := cache.FilteringResourceEventHandler{
		FilterFunc: func(o any) bool {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			p, ok := o.(*corev1.Pod)
			return !ok || hasGate(p) || len(p.Spec.ResourceClaims) > 0
		},
		Handler: all,
	}
	c.synced = []cache.InformerSynced{}
	for _, x := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{claims.Informer(), claimH}, {slices.Informer(), kept(&c.slices)}, {classes.Informer(), kept(&c.classes)}, {taintRules.Informer(), kept(&c.taintRules)},
		{nodes.Informer(), nodeH}, {pods.Informer(), podH}, {templates.Informer(), kept(&c.templates)}} {
		// AddEventHandler only fails on a stopped informer.
		reg, _ := x.inf.AddEventHandler(x.h)
		if reg != nil {
			c.synced = append(c.synced, reg.HasSynced)
		}
		c.synced = append(c.synced, x.inf.HasSynced)
	}
	return c
}

func (c *Cache) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value after any relevant change (coalesced).
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// Trigger asks for another pass, as a change would.
func (c *Cache) Trigger() { c.signal() }

// Start starts the informers; they stop when ctx ends.
func (c *Cache) Start(ctx context.Context) {
	c.factory.Start(ctx.Done())
	c.podFactory.Start(ctx.Done())
}

// WaitForSync blocks until every informer has synced; false if ctx ended.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.synced...)
}

// Shutdown waits for the informers' goroutines after ctx ended.
func (c *Cache) Shutdown() {
	c.factory.Shutdown()
	c.podFactory.Shutdown()
}

// Snapshot is a consistent-enough copy of the caches: object pointers from
// the informers (never modify them), sorted by name for deterministic runs.
type Snapshot struct {
	Claims  []*resourceapi.ResourceClaim
	Slices  []*resourceapi.ResourceSlice
	Classes []*resourceapi.DeviceClass
	Nodes   []*corev1.Node
	Pods    []*corev1.Pod

	TaintRules []*resourceapi.DeviceTaintRule
	Templates  []*resourceapi.ResourceClaimTemplate

	// derived: computed from the kept kinds, shared by the snapshots that
	// have the same ones (nil: compute from the lists).
	derived *inventoryDerived
}

// Snapshot lists every cache. The kept kinds (ResourceSlices,
// DeviceClasses, Nodes, DeviceTaintRules, ResourceClaimTemplates) come
// from their sorted lists, listed again only after an event of theirs;
// claims and pods are listed every time.
func (c *Cache) Snapshot() (*Snapshot, error) {
	s := &Snapshot{}
	var err error
	if s.Claims, err = c.Claims.List(labels.Everything()); err != nil {
		return nil, err
	}
	if s.Pods, err = c.Pods.List(labels.Everything()); err != nil {
		return nil, err
	}
	var gens [5]uint64
	if s.Slices, gens[0], err = keptSorted(&c.slices, c.Slices.List, func(x *resourceapi.ResourceSlice) string { return x.Name }); err != nil {
		return nil, err
	}
	if s.Classes, gens[1], err = keptSorted(&c.classes, c.Classes.List, func(x *resourceapi.DeviceClass) string { return x.Name }); err != nil {
		return nil, err
	}
	if s.Nodes, gens[2], err = keptSorted(&c.nodes, c.Nodes.List, func(x *corev1.Node) string { return x.Name }); err != nil {
		return nil, err
	}
	if s.TaintRules, gens[3], err = keptSorted(&c.taintRules, c.TaintRules.List, func(x *resourceapi.DeviceTaintRule) string { return x.Name }); err != nil {
		return nil, err
	}
	if s.Templates, gens[4], err = keptSorted(&c.templates, c.Templates.List, func(x *resourceapi.ResourceClaimTemplate) string { return x.Namespace + "/" + x.Name }); err != nil {
		return nil, err
	}
	s.derived = c.derivedFor(gens, s)
	sortSnapshot(s)
	return s, nil
}

// sortSnapshot sorts the lists a snapshot lists every time by
// namespace/name (the kept ones are sorted already). Each key is made once,
// not once per comparison: with thousands of claims and pods, building
// the keys in the comparison was most of the batching window's CPU.
func sortSnapshot(s *Snapshot) {
	s.Claims = sortedByKey(s.Claims, claimKey)
	s.Pods = sortedByKey(s.Pods, func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name })
}

// sortedByKey is l sorted by key(x), each key computed once.
func sortedByKey[T any](l []T, key func(T) string) []T {
	type keyed struct {
		k string
		x T
	}
	ks := make([]keyed, len(l))
	for i, x := range l {
		ks[i] = keyed{key(x), x}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].k < ks[j].k })
	for i := range ks {
		l[i] = ks[i].x
	}
	return l
}

func claimKey(c *resourceapi.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// sliceTransform is the transform of the cluster-wide informers:
// stripUnread, and for ResourceSlices the sharing of what many devices
// repeat (share.go). Each transform has its own tables.
func sliceTransform() cache.TransformFunc {
	maps := newDeviceMaps()
	return func(obj any) (any, error) {
		obj, err := stripUnread(obj)
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && err == nil {
			maps.share(s)
		}
		return obj, err
	}
}

// stripUnread drops from every cached object what drasat never reads, as
// the kube-scheduler does with its informers' transform: managedFields, and
// a Node's image list (the kubelet reports dozens of image names a node, and
// drasat never writes Nodes). The writes stay sound without them: an update
// whose managedFields are nil keeps the server's, and no update sends a Node.
func stripUnread(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}
