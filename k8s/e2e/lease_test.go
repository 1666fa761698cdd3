package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/k8s"
)

// claimWrite is one write a watch saw land: who (the allocated-by
// annotation) set the annotation or the allocation of which claim.
type claimWrite struct{ who, what, claim string }

// watchWrites records, in the API server's order, every claim write that
// sets drasat's annotation or an allocation (claim names as ns/name).
func (c *cluster) watchWrites(ctx context.Context) func() []claimWrite {
	w, err := c.admin.ResourceV1().ResourceClaims("").Watch(ctx, metav1.ListOptions{})
	must(c.t, err)
	var mu sync.Mutex
	var out []claimWrite
	last := map[string]*resourceapi.ResourceClaim{}
	go func() {
		for ev := range w.ResultChan() {
			cl, ok := ev.Object.(*resourceapi.ResourceClaim)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			key := cl.Namespace + "/" + cl.Name
			prev := last[key]
			last[key] = cl
			who := cl.Annotations[k8s.AllocatedByAnnotation]
			mu.Lock()
			if who != "" && (prev == nil || prev.Annotations[k8s.AllocatedByAnnotation] != who) {
				out = append(out, claimWrite{who, "annotation", key})
			}
			if cl.Status.Allocation != nil && (prev == nil || prev.Status.Allocation == nil) {
				out = append(out, claimWrite{who, "allocation", key})
			}
			mu.Unlock()
		}
	}()
	return func() []claimWrite {
		mu.Lock()
		defer mu.Unlock()
		return append([]claimWrite(nil), out...)
	}
}

// slowClaimWrites delays each claim write by d while on is set (a slow or
// congested link to the API server); a request whose context ends first is
// not sent.
type slowClaimWrites struct {
	rt http.RoundTripper
	on *atomic.Bool
	d  time.Duration
}

func (s slowClaimWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.on.Load() && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/resourceclaims/") {
		select {
		case <-time.After(s.d):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return s.rt.RoundTrip(req)
}

// partition refuses every Lease update that names holder as the holder:
// holder's renewals fail (its release, which names no holder, passes).
func (c *cluster) partition(holder string) {
	ctx := context.Background()
	name := "e2e-partition-" + holder
	_, err := c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}}}}}},
			Validations: []admissionv1.Validation{{Expression: fmt.Sprintf("object.spec.?holderIdentity.orValue('') != %q", holder),
				Message: holder + " is cut off from the API server (e2e)"}},
		},
	}, metav1.CreateOptions{})
	must(c.t, err)
	_, err = c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	must(c.t, err)
	// Active once a dry-run renewal in holder's name is refused.
	as := c.drasatClient()
	c.eventually("partition active", 30*time.Second, func() (bool, error) {
		l, err := as.CoordinationV1().Leases(drasatNamespace).Get(ctx, "drasat", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l.Spec.HolderIdentity = ptr.To(holder)
		_, err = as.CoordinationV1().Leases(drasatNamespace).Update(ctx, l, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "cut off"), nil
	})
}

// TestLostLease: the leader's renewals start failing while it writes
// (slowly) a batch, as when it is cut off from the API server; the
// standby takes the Lease once it is released or expires. No write of the
// old leader may land after the new leader's first: the old leader stops
// starting writes at the first failed renewal, starts none that could end
// after the Lease expires, and releases the Lease only once the writes in
// flight have returned.
//
// The two replicas serve different namespaces of one device pool: the
// resourceVersion guard already refuses a late write to a claim the
// successor wrote meanwhile, but not one to a claim it left alone, whose
// devices the successor may have given to another claim. That is the
// write the fence must stop.
func TestLostLease(t *testing.T) {
	c := migCluster(t)
	ctx := context.Background()
	const nsA, nsB = "lost-a", "lost-b"
	c.namespace(nsA)
	c.namespace(nsB)
	writes := c.watchWrites(ctx)

	cfg, err := clientcmd.BuildConfigFromFlags("", c.drasatKC)
	must(t, err)
	var slow atomic.Bool
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowClaimWrites{rt: rt, on: &slow, d: 2500 * time.Millisecond}
	})
	client := kubernetes.NewForConfigOrDie(cfg)
	le := k8s.LeaderElection{Namespace: drasatNamespace, Name: "drasat", LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 500 * time.Millisecond}
	flags := []string{"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=500ms", "--write-timeout=3s", "--batch-window=500ms"}
	a := k8s.NewController(client, k8s.Options{Identity: "replica-a", Namespace: nsA, BatchWindow: 500 * time.Millisecond, WriteTimeout: 3 * time.Second,
		LiveOptions: k8s.LiveOptions{WriteWorkers: 1}}, zap.NewNop(), k8s.NewMetrics(), nil)
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	must(t, a.Start(actx))
	aDone := make(chan error, 1)
	go func() { aDone <- a.RunWithLeaderElection(actx, client, le) }()
	defer func() {
		stopA()
		a.Stop()
	}()
	c.eventually("replica-a leads", 30*time.Second, func() (bool, error) { return c.leaseHolder() == "replica-a", nil })
	b := c.startDrasat("replica-b", append(flags, "--namespace="+nsB)...)

	// Between replica-a's solve and its writes: cut it off, and slow its
	// claim writes down.
	var once sync.Once
	a.Reconciler.AfterSolve = func([]*resourceapi.ResourceClaim) {
		once.Do(func() {
			c.partition("replica-a")
			slow.Store(true)
			t.Log("replica-a cut off; its claim writes take 2.5 s")
		})
	}
	for i := range 3 {
		c.createClaim(nsB, fmt.Sprintf("b%d", i), migSpec("1g.5gb"), true)
	}
	for i := range 6 {
		c.createClaim(nsA, fmt.Sprintf("a%d", i), migSpec("1g.5gb"), true)
	}
	c.eventually("replica-b allocated its claims", 2*time.Minute, func() (bool, error) {
		for _, cl := range c.claims(nsB) {
			if cl.Status.Allocation == nil {
				return false, nil
			}
		}
		return true, nil
	})
	// replica-a's writes in flight have landed once it has stopped.
	select {
	case err := <-aDone:
		if err == nil || !strings.Contains(err.Error(), "lost") {
			t.Errorf("replica-a ended with %v, want leadership lost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("replica-a still running a minute after losing the Lease")
	}
	time.Sleep(time.Second) // the watch catches up
	got := writes()
	firstB := -1
	for i, w := range got {
		t.Logf("write %d: %s %s of %s", i, w.who, w.what, w.claim)
		if w.who == "replica-b" && firstB < 0 {
			firstB = i
		}
	}
	if firstB < 0 {
		t.Fatal("replica-b wrote nothing: the test did not exercise a takeover")
	}
	for _, w := range got[firstB:] {
		if w.who == "replica-a" {
			t.Errorf("replica-a's %s of %s landed after replica-b's first write", w.what, w.claim)
		}
	}
	if b.exited() {
		t.Errorf("replica-b exited: %v", b.err)
	}
	c.assertFeasible()
}

// TestConcurrentOnce: two `drasat reconcile --once` runs started together
// with default flags never lead at the same time: each has its own
// identity, so the second waits for the Lease (or refuses while it is
// held) instead of taking it as its own.
func TestConcurrentOnce(t *testing.T) {
	c := migCluster(t)
	const ns = "once"
	c.namespace(ns)
	for i := range 8 {
		c.createClaim(ns, fmt.Sprintf("o%d", i), migSpec("1g.5gb"), true)
	}
	type run struct {
		stderr      string
		err         error
		start, stop time.Time
		identity    string
	}
	runs := make([]run, 2)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(drasatBin, "reconcile", "--once", "--kubeconfig="+c.drasatKC, "--leader-elect-namespace="+drasatNamespace,
				"--log-level=info", "--leader-elect-retry-period=500ms", "--leader-elect-renew-deadline=4s", "--leader-elect-lease-duration=8s", "--write-timeout=3s")
			var errb strings.Builder
			cmd.Stderr = &errb
			runs[i].err = cmd.Run()
			runs[i].stderr = errb.String()
		}()
	}
	wg.Wait()
	// Leading spans from "became leader" to "leadership released", both
	// logged with their time.
	for i := range runs {
		r := &runs[i]
		for _, line := range strings.Split(r.stderr, "\n") {
			var l struct {
				TS       float64 `json:"ts"`
				Msg      string  `json:"msg"`
				Identity string  `json:"identity"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			at := time.Unix(0, int64(l.TS*1e9))
			switch l.Msg {
			case "became leader":
				r.start, r.identity = at, l.Identity
			case "leadership released":
				r.stop = at
			}
		}
		t.Logf("run %d (%s): err %v, led %s .. %s\n%s", i, r.identity, r.err, r.start.Format(time.StampMilli), r.stop.Format(time.StampMilli), lastLines(r.stderr, 3))
	}
	led := 0
	for _, r := range runs {
		if !r.start.IsZero() {
			led++
			if r.stop.IsZero() {
				t.Errorf("%s became leader but never released the Lease", r.identity)
			}
		} else if r.err == nil || !strings.Contains(r.stderr, "is held by") {
			t.Errorf("a run that did not lead: err %v; want it to refuse, naming the holder", r.err)
		}
	}
	if led == 0 {
		t.Fatal("no run led")
	}
	if runs[0].identity == runs[1].identity && runs[0].identity != "" {
		t.Errorf("both runs used the identity %q", runs[0].identity)
	}
	if led == 2 && runs[0].start.Before(runs[1].stop) && runs[1].start.Before(runs[0].stop) {
		t.Errorf("both runs led at once")
	}
	for _, cl := range c.claims(ns) {
		if cl.Status.Allocation == nil {
			t.Errorf("claim %s not allocated", cl.Name)
		}
	}
	c.assertFeasible()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
