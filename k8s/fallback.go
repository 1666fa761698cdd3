package k8s

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// ReasonHandedOver: a gated pod waited longer than Options.UngateAfter
// and drasat removed its gate, leaving its claims to the scheduler.
const ReasonHandedOver = "HandedToScheduler"

// handOver removes the gate of every gated pod (in the namespace) created
// more than Options.UngateAfter ago: a fallback for pods drasat could not
// allocate in time, so that a workload is not held back longer than its
// owner accepts. The scheduler then allocates what drasat did not (it
// treats the allocated claims as fixed), which is valid, though not
// drasat's optimum. Off when UngateAfter is 0.
func (r *Reconciler) handOver(ctx context.Context, snap *Snapshot, res *PassResult) {
	if r.Opts.UngateAfter <= 0 || r.Opts.DryRun {
		return
	}
	cut := time.Now().Add(-r.Opts.UngateAfter)
	for _, p := range snap.Pods {
		if !hasGate(p) || p.DeletionTimestamp != nil || (r.Opts.Namespace != "" && p.Namespace != r.Opts.Namespace) ||
			r.ungated[p.Namespace+"/"+p.Name] || p.CreationTimestamp.IsZero() || !p.CreationTimestamp.Time.Before(cut) {
			continue
		}
		if err := r.removeGate(ctx, p); err != nil {
			r.Log.Info("could not hand pod over to the scheduler", zap.String("pod", p.Namespace+"/"+p.Name), zap.Error(err))
			res.Requeue = true
			continue
		}
		r.gateRemoved(p.Namespace+"/"+p.Name, res)
		why := fmt.Sprintf("gated for more than %s (--ungate-after); scheduling gate %s removed, the scheduler allocates the claims drasat has not", r.Opts.UngateAfter, SchedulingGate)
		r.Log.Warn("pod handed to the scheduler", zap.String("pod", p.Namespace+"/"+p.Name), zap.Duration("after", r.Opts.UngateAfter))
		if r.Recorder != nil {
			r.Recorder.Event(p, corev1.EventTypeWarning, ReasonHandedOver, why)
		}
	}
}
