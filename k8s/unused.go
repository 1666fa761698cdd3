package k8s

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unusedReason starts the drasat.dev/unallocatable annotation of a
// standalone claim whose allocation drasat withdrew because nothing used
// it: such a claim is not allocated again until a gated pod uses it or
// someone removes the annotation.
const unusedReason = "withdrawn: unused"

// releaseUnused bounds how long a standalone claim (drasat.dev/managed)
// keeps devices without a consumer: an allocation drasat wrote that no pod
// has reserved and no pod names, older than Options.UnusedAfter, is
// withdrawn (marked first, so it is not simply allocated again), with a
// Warning Event AllocationWithdrawn.
func (r *Reconciler) releaseUnused(ctx context.Context, snap *Snapshot, res *PassResult) {
	if r.Opts.UnusedAfter <= 0 || r.Opts.DryRun {
		return
	}
	named := map[string]bool{}
	for _, p := range snap.Pods {
		names, _ := podClaimNames(p)
		for _, n := range names {
			named[p.Namespace+"/"+n] = true
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				named[p.Namespace+"/"+*rc.ResourceClaimName] = true
			}
		}
	}
	now := time.Now()
	for _, c := range snap.Claims {
		a := c.Status.Allocation
		if !isManaged(c) || a == nil || a.AllocationTimestamp == nil || c.Annotations[AllocatedByAnnotation] == "" ||
			len(c.Status.ReservedFor) > 0 || c.DeletionTimestamp != nil || named[claimKey(c)] ||
			(r.Opts.Namespace != "" && c.Namespace != r.Opts.Namespace) || now.Sub(a.AllocationTimestamp.Time) < r.Opts.UnusedAfter {
			continue
		}
		why := fmt.Sprintf("%s for %s since it was allocated (no pod names or reserved it); remove this annotation to have it allocated again", unusedReason, r.Opts.UnusedAfter)
		u := c.DeepCopy()
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
		u.Annotations[UnallocatableAnnotation] = why
		wctx, done, err := r.startWrite(ctx)
		if err != nil {
			return
		}
		marked, err := r.Client.ResourceV1().ResourceClaims(c.Namespace).Update(wctx, u, metav1.UpdateOptions{FieldManager: Component})
		done()
		if err != nil {
			r.Log.Info("could not mark unused claim", zap.String("claim", claimKey(c)), zap.Error(err))
			res.Requeue = true
			continue
		}
		if err := r.withdraw(ctx, marked, fmt.Errorf("%s", why)); err != nil {
			r.Log.Info("could not withdraw unused claim", zap.String("claim", claimKey(c)), zap.Error(err))
			res.Requeue = true
			continue
		}
		res.Withdrawn++
		r.Metrics.Skipped.WithLabelValues("ResourceClaim").Inc()
		r.Log.Warn("unused allocation withdrawn", zap.String("claim", claimKey(c)), zap.String("devices", devices(c)), zap.Duration("unusedFor", now.Sub(a.AllocationTimestamp.Time)))
	}
}
