package k8s

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// allowAccessReviews makes the fake API server answer every
// SelfSubjectAccessReview with allowed.
func allowAccessReviews(client *fake.Clientset, allowed bool) {
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = allowed
		return true, r, nil
	})
}

// On shutdown the write in flight finishes before the Lease is released:
// a successor must never write while this replica still does.
func TestRunLeadingReleasesLeaseAfterWork(t *testing.T) {
	client := fake.NewClientset()
	allowAccessReviews(client, true)
	var mu sync.Mutex
	var events []string
	record := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			record("released")
		}
		return false, nil, nil
	})
	opts := Options{Identity: "a", WriteTimeout: 500 * time.Millisecond}
	opts.Defaults()
	ctl := &Controller{Reconciler: &Reconciler{Opts: opts, Log: zap.NewNop(), Metrics: NewMetrics()}}
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- ctl.RunLeading(ctx, client, LeaderElection{Namespace: "drasat-system", Name: "drasat",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
			func(ctx context.Context) error {
				close(leading)
				<-ctx.Done()
				time.Sleep(300 * time.Millisecond) // the write in flight
				record("write finished")
				return nil
			})
	}()
	<-leading
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != "write finished,released" {
		t.Errorf("order %v; want the write finished, then the Lease released", events)
	}
}

// A Lease this identity may not take fails at once, naming the Lease and
// the namespace to use.
func TestRunLeadingFailsWithoutLeaseAccess(t *testing.T) {
	client := fake.NewClientset()
	allowAccessReviews(client, false)
	opts := Options{WriteTimeout: 100 * time.Millisecond}
	opts.Defaults()
	ctl := &Controller{Reconciler: &Reconciler{Opts: opts, Log: zap.NewNop(), Metrics: NewMetrics()}}
	err := ctl.RunLeading(context.Background(), client, LeaderElection{Namespace: "kube-system", Name: "drasat",
		LeaseDuration: time.Second, RenewDeadline: time.Second / 2, RetryPeriod: time.Second / 10},
		func(context.Context) error { t.Error("ran without the Lease"); return nil })
	if err == nil || !strings.Contains(err.Error(), "kube-system/drasat") || !strings.Contains(err.Error(), DefaultLeaseNamespace) {
		t.Errorf("err = %v; want a message naming the Lease and %s", err, DefaultLeaseNamespace)
	}
}

// /healthz fails while a pass runs longer than StuckAfter, and recovers.
func TestHealthzStuckPass(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &Health{StuckAfter: time.Minute, now: func() time.Time { return now }}
	srv := httptest.NewServer(NewMetrics().Handler(h))
	defer srv.Close()
	status := func() int {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s != http.StatusOK {
		t.Fatalf("idle: %d", s)
	}
	h.PassStarted()
	now = now.Add(59 * time.Second)
	if s := status(); s != http.StatusOK {
		t.Fatalf("pass within budget: %d", s)
	}
	now = now.Add(2 * time.Second)
	if s := status(); s != http.StatusServiceUnavailable {
		t.Fatalf("pass stuck for 61s: %d, want 503", s)
	}
	h.PassEnded()
	if s := status(); s != http.StatusOK {
		t.Fatalf("after the pass: %d", s)
	}
}

// A pass stuck past StuckAfter gives the Lease up (released, so the
// standby need not wait for it to expire) and the stuck pass can write
// nothing more.
func TestRunLeadingGivesUpWhenStuck(t *testing.T) {
	client := fake.NewClientset()
	allowAccessReviews(client, true)
	released := make(chan struct{}, 1)
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			select {
			case released <- struct{}{}:
			default:
			}
		}
		return false, nil, nil
	})
	opts := Options{Identity: "a", WriteTimeout: 500 * time.Millisecond}
	opts.Defaults()
	r := &Reconciler{Opts: opts, Log: zap.NewNop(), Metrics: NewMetrics()}
	ctl := &Controller{Reconciler: r, Health: &Health{StuckAfter: time.Second}}
	unblock := make(chan struct{})
	defer close(unblock)
	fenced := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- ctl.RunLeading(context.Background(), client, LeaderElection{Namespace: "drasat-system", Name: "drasat",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
			func(ctx context.Context) error {
				ctl.Health.PassStarted() // and never ends
				<-unblock
				_, _, err := r.startWrite(ctx)
				fenced <- err
				return nil
			})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "gave up the Lease") {
			t.Errorf("RunLeading: %v, want it to give up the Lease", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stuck pass kept the Lease")
	}
	select {
	case <-released:
	default:
		t.Error("the Lease was not released")
	}
	unblock <- struct{}{}
	if err := <-fenced; err == nil {
		t.Error("the stuck pass could still write after giving up the Lease")
	}
}
