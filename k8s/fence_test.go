package k8s

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock records the updates client-go would make.
type fakeLock struct {
	resourcelock.Interface
	err     error
	updates []string
}

func (l *fakeLock) Identity() string { return "me" }
func (l *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.updates = append(l.updates, ler.HolderIdentity)
	return l.err
}
func (l *fakeLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

// TestFence: writes start only while the last renewal succeeded and the
// write ends before the Lease could expire; a failed renewal stops them at
// once, a release waits for the writes in flight and closes for good.
func TestFence(t *testing.T) {
	t0 := time.Now()
	now := t0
	f := newFence(15*time.Second, 4*time.Second)
	f.now = func() time.Time { return now }
	inner := &fakeLock{}
	lock := &fencedLock{Interface: inner, fence: f}
	ctx := context.Background()
	admitted := func() error {
		_, done, err := f.begin(ctx)
		if err == nil {
			done()
		}
		return err
	}
	if err := admitted(); !errors.Is(err, ErrFenced) {
		t.Fatalf("before the Lease is acquired: %v, want fenced", err)
	}
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := admitted(); err != nil {
		t.Fatalf("right after acquiring: %v", err)
	}
	now = t0.Add(10*time.Second + 999*time.Millisecond)
	if err := admitted(); err != nil {
		t.Fatalf("a write ending 1 ms before expiry: %v", err)
	}
	now = t0.Add(11 * time.Second)
	if err := admitted(); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "may expire") {
		t.Fatalf("a write that could end after expiry: %v, want fenced", err)
	}
	// A renewal at 11 s extends it; a failed one stops writes at once.
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := admitted(); err != nil {
		t.Fatalf("after a renewal: %v", err)
	}
	inner.err = errors.New("connection refused")
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := admitted(); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "renewal failed") {
		t.Fatalf("after a failed renewal: %v, want fenced", err)
	}
	inner.err = nil
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := admitted(); err != nil {
		t.Fatalf("after the renewal succeeded again: %v", err)
	}
	// The write context outlives ctx (no half-written claim) but not the
	// write timeout.
	cctx, cancel := context.WithCancel(ctx)
	wctx, done, err := f.begin(cctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if wctx.Err() != nil {
		t.Error("the write was cancelled with its caller's context")
	}
	if d, ok := wctx.Deadline(); !ok || !d.Equal(now.Add(4*time.Second)) {
		t.Errorf("write deadline %v, want now + 4s", d)
	}
	if _, _, err := f.begin(cctx); err == nil {
		t.Error("a write started with a cancelled context")
	}
	// Releasing waits for the write in flight, and nothing starts after.
	released := make(chan struct{})
	go func() {
		_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{})
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("the Lease was released while a write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	done()
	<-released
	if got := inner.updates[len(inner.updates)-1]; got != "" {
		t.Errorf("last update holder %q, want the release", got)
	}
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := admitted(); !errors.Is(err, ErrFenced) {
		t.Fatalf("after the release: %v, want fenced for good", err)
	}
}

// TestLeaderElectionValidate: the write timeout must fit between the renew
// deadline and the lease duration.
func TestLeaderElectionValidate(t *testing.T) {
	le := LeaderElection{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	if err := le.Validate(DefaultWriteTimeout); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if err := le.Validate(5 * time.Second); err == nil || !strings.Contains(err.Error(), "--write-timeout") {
		t.Errorf("write timeout = lease - renew: %v, want an error naming --write-timeout", err)
	}
	bad := le
	bad.RenewDeadline = 15 * time.Second
	if err := bad.Validate(time.Second); err == nil || !strings.Contains(err.Error(), "--leader-elect-renew-deadline") {
		t.Errorf("renew deadline = lease duration: %v", err)
	}
}
