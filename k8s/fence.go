package k8s

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrFenced: a write was not started because this replica may no longer
// hold the Lease when it would end (a renewal failed, the Lease is being
// released, or it would expire first). The claims stay pending, which is
// safe; the successor allocates them.
var ErrFenced = errors.New("not writing: leadership not assured for the write's duration")

// fence admits API writes only while the Lease is held for longer than a
// write can take. Every write of a leader goes through it:
//
//   - a write starts only if the last renewal succeeded and it will end
//     (WriteTimeout) before the Lease, as renewed, expires for everyone
//     else: validUntil is the start of the last successful renewal plus the
//     lease duration, and a standby measures the expiry from when it
//     observed that renewal, which is later;
//   - the first failed renewal stops new writes (a later success resumes
//     them);
//   - releasing the Lease (client-go does it on shutdown and, with
//     ReleaseOnCancel, right after a failed renewal, before the leader's
//     context ends) first closes the fence and waits for the writes in
//     flight, which end by their deadline.
//
// So no write of this replica can land after a successor took the Lease,
// unless the network delivers a request after its client-side deadline.
type fence struct {
	leaseDuration time.Duration
	writeTimeout  time.Duration
	now           func() time.Time

	mu         sync.Mutex
	idle       *sync.Cond
	validUntil time.Time // zero: not leading
	failing    bool      // the last renewal attempt failed
	closed     bool      // released or stopped leading: never opens again
	inFlight   int
}

func newFence(leaseDuration, writeTimeout time.Duration) *fence {
	f := &fence{leaseDuration: leaseDuration, writeTimeout: writeTimeout, now: time.Now}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// begin admits one write: it returns the write's context (bounded by the
// write timeout, not cancelled with ctx: a claim is never left
// half-written by drasat's own cancellation) and the function to call when
// the write has returned.
func (f *fence) begin(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	switch {
	case f.closed || f.validUntil.IsZero():
		return nil, nil, fmt.Errorf("%w (not leading)", ErrFenced)
	case f.failing:
		return nil, nil, fmt.Errorf("%w (the last Lease renewal failed)", ErrFenced)
	case !now.Add(f.writeTimeout).Before(f.validUntil):
		return nil, nil, fmt.Errorf("%w (the Lease, last renewed %s ago, may expire within the write timeout %s)",
			ErrFenced, f.leaseDuration-f.validUntil.Sub(now), f.writeTimeout)
	}
	f.inFlight++
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), now.Add(f.writeTimeout))
	var once sync.Once
	return wctx, func() {
		once.Do(func() {
			cancel()
			f.mu.Lock()
			f.inFlight--
			if f.inFlight == 0 {
				f.idle.Broadcast()
			}
			f.mu.Unlock()
		})
	}, nil
}

// renewing records the outcome of a renewal (or acquisition) that started
// at start.
func (f *fence) renewing(start time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.failing = true
		return
	}
	f.failing = false
	if !f.closed {
		f.validUntil = start.Add(f.leaseDuration)
	}
}

// close stops all writes for good and waits for those in flight.
func (f *fence) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for f.inFlight > 0 {
		f.idle.Wait()
	}
}

// fencedLock is client-go's Lease lock with the fence told of every
// renewal, and closed before the Lease is released.
type fencedLock struct {
	resourcelock.Interface
	fence *fence
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Create(ctx, ler)
	l.fence.renewing(start, err)
	return err
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.Identity() {
		// Releasing (client-go writes an empty holder): nothing of ours
		// may be in flight once a successor can take the Lease.
		l.fence.close()
		return l.Interface.Update(ctx, ler)
	}
	start := l.fence.now()
	err := l.Interface.Update(ctx, ler)
	l.fence.renewing(start, err)
	return err
}

// noFence admits every write while ctx lasts: without leader election
// (--leader-elect=false) there is no Lease to fence with.
func noFence(ctx context.Context, writeTimeout time.Duration) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	return wctx, cancel, nil
}

// startWrite admits one API write (see fence): call it immediately before
// each request, and the returned function once the request has returned.
func (r *Reconciler) startWrite(ctx context.Context) (context.Context, func(), error) {
	if r.fence == nil {
		return noFence(ctx, r.Opts.WriteTimeout)
	}
	return r.fence.begin(ctx)
}
