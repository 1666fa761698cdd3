// Package k8s is drasat's Kubernetes adapter: it watches a cluster's DRA
// objects through client-go informers, allocates the ResourceClaims drasat is
// responsible for in batches with the optimal engine (alloc), and writes the
// allocations back as the kube-scheduler would: the delete-protection
// finalizer first, then status.allocation with a resourceVersion-guarded
// status update. Before each write the result is re-checked (package check)
// against the latest informer cache, so a device taken meanwhile is never
// allocated twice.
//
// Which claims are drasat's:
//   - claims used by pods that carry the scheduling gate drasat.dev/allocate
//     (the scheduler ignores gated pods, so it never races drasat for them);
//     once all claims of such a pod are allocated, drasat removes the gate
//     and the scheduler places the pod on a node the allocations allow;
//   - standalone claims labelled drasat.dev/managed=true.
//
// Every other claim is left to the kube-scheduler, which allocates it when it
// schedules the pod: drasat cannot stop the scheduler from allocating an
// ungated pod's claims, so taking them over would only produce conflicting
// writes. Claims allocated by anyone are taken into account as fixed.
//
// See docs/adapter.md.
package k8s
