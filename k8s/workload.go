package k8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
)

// The frag look-ahead's workload (frag.Workload) is what the controller
// expects to come. It learns it from the claims it allocates; started
// with nothing, it knows nothing until the first claims are allocated,
// and a task held to a GPU model or to the largest nodes weighs nothing
// until the first such task is seen (bench.md, "The workload the
// look-ahead knows": on the FGD paper's gpuspec10 list that turned away
// 20 tasks before 90 % arrived, against 2 with the list's workload
// known). So a controller starts from what it can know: the claims
// already allocated in the cluster when it starts (a restart, a rolling
// update, a cluster drasat joins), and a record of past claims and pods
// given by --workload-from (Options.Workload).

// PlaceLabel is the label deploy/'s gating policy reads: a pod without
// claims labelled PlaceLabel=true is gated, and drasat places it
// (Options.PlacePods). Such pods are the CPU-only tasks of the workload.
const PlaceLabel = "drasat.dev/place"

// LoadWorkload reads a workload to start from out of files of Kubernetes
// objects (kubectl get resourceclaims,pods -A -o yaml of a past period):
// every ResourceClaim is a task of its spec, with its pod's CPU request
// when withCPU (the shapes the controller learns with
// --place-pods-without-claims), and, when withCPU, every pod without claims
// labelled PlaceLabel=true is a CPU-only task. Other objects are ignored.
// A file that does not parse, or that holds neither, is an error naming
// the file.
func LoadWorkload(files []string, withCPU bool) (*frag.Workload, error) {
	w := frag.NewWorkload()
	for _, f := range files {
		objs, _, err := input.Load([]string{f}, nil)
		if err != nil {
			return nil, fmt.Errorf("workload: %w", err)
		}
		before := w.Total()
		observeTasks(w, objs.Claims, objs.Pods, withCPU, nil, nil)
		if w.Total() == before {
			return nil, fmt.Errorf("workload: %s: no ResourceClaims, and no pods without claims labelled %s=true", f, PlaceLabel)
		}
	}
	return w, nil
}

// observeTasks counts the claims that claim accepts (nil: all), each
// with the CPU of the pod that uses it when withCPU, and when withCPU the
// pods without claims labelled PlaceLabel=true that pod accepts (nil:
// all), as CPU-only tasks.
func observeTasks(w *frag.Workload, claims []*resourceapi.ResourceClaim, pods []*corev1.Pod, withCPU bool,
	claim func(*resourceapi.ResourceClaim) bool, pod func(*corev1.Pod) bool) {
	var cpu map[string]corev1.ResourceList
	if withCPU {
		cpu = podCPUByClaim(pods, nil)
	}
	for _, c := range claims {
		if claim == nil || claim(c) {
			w.ObserveTask(c, cpu[claimKey(c)])
		}
	}
	if !withCPU {
		return
	}
	for _, p := range pods {
		if len(p.Spec.ResourceClaims) == 0 && p.Labels[PlaceLabel] == "true" && (pod == nil || pod(p)) {
			w.ObserveTask(nil, podCPU(p))
		}
	}
}

// startWorkload gives the frag look-ahead, at the controller's first
// pass, the workload to start from: Options.Workload, and the tasks
// running in the cluster (served namespace) at that moment: the claims
// allocated, and with PlacePods the bound pods without claims labelled
// PlaceLabel=true.
func (r *Reconciler) startWorkload(snap *Snapshot) {
	if r.workloadStarted || r.Opts.Policy != alloc.Frag {
		return
	}
	r.workloadStarted = true
	w := r.Opts.Workload
	if w == nil {
		w = frag.NewWorkload()
	}
	served := func(ns string) bool { return r.Opts.Namespace == "" || ns == r.Opts.Namespace }
	observeTasks(w, snap.Claims, snap.Pods, r.Opts.PlacePods,
		func(c *resourceapi.ResourceClaim) bool {
			return c.Status.Allocation != nil && c.DeletionTimestamp == nil && served(c.Namespace)
		},
		func(p *corev1.Pod) bool {
			return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && served(p.Namespace) &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
		})
	if w.Shapes() > 0 {
		r.workload = w
		r.Log.Sugar().Infow("look-ahead workload to start from", "tasks", w.Total(), "shapes", w.Shapes())
	}
}
