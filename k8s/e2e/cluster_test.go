// Package e2e runs drasat against real Kubernetes components: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager (v1.37.1, built
// from Go modules by tools/e2e/build.sh into .cache/e2e-bin), started as
// subprocesses on loopback ports. There is no kubelet: Nodes are created
// directly. drasat itself runs as its real binary, authenticated as the
// ServiceAccount of deploy/ and authorised by deploy/'s RBAC.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Feature gates for every component: DRA is GA in 1.37; compatibility
// groups are alpha and need partitionable devices.
const featureGates = "DRAPartitionableDevices=true,DRADeviceCompatibilityGroups=true,DRAPrioritizedList=true,DRAAdminAccess=true"

const (
	adminToken  = "drasat-e2e-admin"
	drasatToken = "drasat-e2e-controller"
	// The identity of deploy/'s ServiceAccount, as the token file names it.
	drasatNamespace = "drasat-system"
	drasatUser      = "system:serviceaccount:drasat-system:drasat"
)

var (
	binDir    string // etcd, kube-apiserver, kube-scheduler, kube-controller-manager
	drasatBin string // bin/drasat built for this run
	repoRoot  string
	keepLogs  = flag.Bool("e2e.keep", false, "keep the clusters' directories and logs")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode (needs etcd, kube-apiserver, kube-scheduler, kube-controller-manager; see tools/e2e)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	binDir = os.Getenv("E2E_BIN")
	if binDir == "" {
		binDir = filepath.Join(repoRoot, ".cache", "e2e-bin")
	}
	// Build the components when the cache lacks them (about ten minutes).
	build := exec.Command(filepath.Join(repoRoot, "tools", "e2e", "build.sh"))
	build.Env = append(os.Environ(), "E2E_BIN="+binDir)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the Kubernetes components failed:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "drasat-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	drasatBin = filepath.Join(tmp, "drasat")
	b := exec.Command("go", "build", "-o", drasatBin, "./cmd/drasat")
	b.Dir = repoRoot
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	if err := b.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building drasat failed:", err)
		return 1
	}
	return m.Run()
}

// proc is one started component.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

// stop sends SIGTERM and waits, then SIGKILL.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// cluster is a running control plane.
type cluster struct {
	t       *testing.T
	dir     string
	apiPort int
	etcd    *proc
	api     *proc
	sched   *proc
	kcm     *proc
	drasats []*proc

	admin      kubernetes.Interface
	adminCfg   *rest.Config
	kubeconfig string // admin
	drasatKC   string // deploy/'s ServiceAccount
	apiArgs    []string
	mu         sync.Mutex
}

// clusterOptions vary newClusterWith.
type clusterOptions struct {
	// controllers run by kube-controller-manager (default: the
	// resourceclaim controller only).
	controllers []string
	// kustomization applied after start (default: deploy/, i.e.
	// `kubectl apply -k deploy/`).
	kustomization string
}

// newCluster starts etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager (resourceclaim controller only), and installs
// drasat as `kubectl apply -k deploy/` does.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterWith(t, clusterOptions{})
}

func newClusterWith(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	if len(o.controllers) == 0 {
		o.controllers = []string{"resourceclaim-controller"}
	}
	// The status controller type-checks admission policies
	// (waitPoliciesChecked).
	if !slices.Contains(o.controllers, "validatingadmissionpolicy-status-controller") {
		o.controllers = append(o.controllers, "validatingadmissionpolicy-status-controller")
	}
	if o.kustomization == "" {
		o.kustomization = "deploy"
	}
	dir, err := os.MkdirTemp("", "drasat-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir}
	t.Cleanup(c.cleanup)
	start := time.Now()

	etcdClient, etcdPeer := freePort(t), freePort(t)
	c.etcd = startProc(t, dir, "etcd", filepath.Join(binDir, "etcd"),
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=e2e=http://127.0.0.1:%d", etcdPeer),
		"--listen-metrics-urls=", "--log-level=warn", "--quota-backend-bytes=1073741824", "--unsafe-no-fsync")

	// Service-account signing key and static tokens.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "sa.key")
	writeFile(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(fmt.Sprintf("%s,e2e-admin,e2e-admin,\"system:masters\"\n%s,%s,drasat-e2e-uid,\"system:serviceaccounts,system:serviceaccounts:%s,system:authenticated\"\n",
		adminToken, drasatToken, drasatUser, drasatNamespace)))

	c.apiPort = freePort(t)
	c.apiArgs = []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + keyPath,
		"--service-account-signing-key-file=" + keyPath,
		"--disable-admission-plugins=ServiceAccount",
		"--feature-gates=" + featureGates,
		"--runtime-config=resource.k8s.io/v1=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--endpoint-reconciler-type=none",
		"--v=1",
	}
	c.startAPIServer()

	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	c.drasatKC = filepath.Join(dir, "drasat.kubeconfig")
	writeFile(t, c.kubeconfig, kubeconfig(c.apiPort, adminToken))
	writeFile(t, c.drasatKC, kubeconfig(c.apiPort, drasatToken))
	c.adminCfg = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", c.apiPort), BearerToken: adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}
	c.admin = kubernetes.NewForConfigOrDie(c.adminCfg)
	c.waitAPIServer()

	common := []string{"--kubeconfig=" + c.kubeconfig, "--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig, "--bind-address=127.0.0.1", "--leader-elect=false",
		"--feature-gates=" + featureGates, "--v=1"}
	c.sched = startProc(t, dir, "kube-scheduler", filepath.Join(binDir, "kube-scheduler"),
		append(common, fmt.Sprintf("--secure-port=%d", freePort(t)), "--v="+envOr("E2E_SCHEDULER_V", "1"))...)
	c.kcm = startProc(t, dir, "kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		append(common, fmt.Sprintf("--secure-port=%d", freePort(t)), "--controllers="+strings.Join(o.controllers, ","),
			"--use-service-account-credentials=false")...)

	c.applyKustomization(o.kustomization)
	t.Logf("cluster up in %s (dir %s)", time.Since(start).Round(time.Millisecond), dir)
	return c
}

func (c *cluster) startAPIServer() {
	c.api = startProc(c.t, c.dir, "kube-apiserver", filepath.Join(binDir, "kube-apiserver"), c.apiArgs...)
}

// waitAPIServer waits until /readyz answers ok.
func (c *cluster) waitAPIServer() {
	c.t.Helper()
	hc, _ := rest.HTTPClientFor(c.adminCfg)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		if c.api.exited() {
			return false, fmt.Errorf("kube-apiserver exited: %v\n%s", c.api.err, c.api.tail(30))
		}
		resp, err := hc.Get(c.adminCfg.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		c.t.Fatalf("kube-apiserver not ready: %v\n%s", err, c.api.tail(30))
	}
}

// restartAPIServer stops and restarts the API server on the same port and
// storage.
func (c *cluster) restartAPIServer(down time.Duration) {
	c.api.stop()
	time.Sleep(down)
	c.startAPIServer()
	c.waitAPIServer()
}

func (c *cluster) cleanup() {
	for _, p := range c.drasats {
		p.stop()
	}
	for _, p := range []*proc{c.kcm, c.sched, c.api, c.etcd} {
		if p != nil {
			p.stop()
		}
	}
	if c.t.Failed() || *keepLogs {
		for _, p := range append([]*proc{c.etcd, c.api, c.sched, c.kcm}, c.drasats...) {
			if p != nil {
				c.t.Logf("--- %s (last lines of %s)\n%s", p.name, p.log, p.tail(25))
			}
		}
	}
	if *keepLogs {
		c.t.Logf("kept %s", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

func kubeconfig(port int, token string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: e2e
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
`, port, token))
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// applyKustomization installs a kustomization of the repository (deploy/
// or an overlay) as `kubectl apply -k` does: rendered by kubectl's built-in
// kustomize, applied server-side object by object, so every manifest must
// be accepted by the real API server. Then it waits until the API server
// has type-checked drasat's admission policies without warnings.
func (c *cluster) applyKustomization(dir string) {
	t := c.t
	docs := c.renderKustomization(dir)
	ctx := context.Background()
	dc := discovery.NewDiscoveryClientForConfigOrDie(c.adminCfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := dynamic.NewForConfigOrDie(c.adminCfg)
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", dir, gvk, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true}); err != nil {
			t.Fatalf("%s: apply %s %s/%s: %v", dir, gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	c.waitPoliciesChecked()
}

// renderKustomization returns the documents of `kubectl kustomize dir`.
// Without kubectl, deploy/ is rendered by concatenating the resources its
// base lists (it has no patches); overlays need kubectl.
func (c *cluster) renderKustomization(dir string) [][]byte {
	t := c.t
	var out []byte
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		path := dir
		if !filepath.IsAbs(path) {
			path = filepath.Join(repoRoot, dir)
		}
		cmd := exec.Command(kubectl, "kustomize", path)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if out, err = cmd.Output(); err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, errb.String())
		}
	} else if dir == "deploy" {
		var k struct{ Resources []string }
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "base", "kustomization.yaml"))
		must(t, err)
		must(t, yaml.Unmarshal(b, &k))
		for _, r := range k.Resources {
			b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "base", r))
			must(t, err)
			out = append(append(out, b...), "\n---\n"...)
		}
	} else {
		t.Skipf("%s: rendering an overlay needs kubectl (kustomize)", dir)
	}
	var docs [][]byte
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

// waitPoliciesChecked waits until the API server has type-checked every
// admission policy, and fails on type-check warnings (a misspelt field
// would otherwise only show when a request comes).
func (c *cluster) waitPoliciesChecked() {
	t := c.t
	ctx := context.Background()
	c.eventually("admission policies type-checked", 30*time.Second, func() (bool, error) {
		l, err := c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, nil
			}
			for _, w := range p.Status.TypeChecking.ExpressionWarnings {
				t.Fatalf("policy %s: %s: %s", p.Name, w.FieldRef, w.Warning)
			}
		}
		return true, nil
	})
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// startDrasat runs `drasat controller` with deploy/'s identity.
func (c *cluster) startDrasat(name string, args ...string) *proc {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	base := []string{"controller", "--kubeconfig=" + c.drasatKC, "--identity=" + name,
		"--leader-elect-namespace=" + drasatNamespace, "--metrics-addr=127.0.0.1:0", "--log-level=info"}
	p := startProc(c.t, c.dir, name, drasatBin, append(base, args...)...)
	c.drasats = append(c.drasats, p)
	return p
}

// reconcileOnce runs `drasat reconcile --once` and returns its stdout.
func (c *cluster) reconcileOnce(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(drasatBin, append([]string{"reconcile", "--once", "--kubeconfig=" + c.drasatKC, "--log-level=warn"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("drasat reconcile --once: %v\n%s", err, errb.String())
	}
	c.t.Logf("drasat reconcile --once: %s", strings.TrimSpace(errb.String()))
	return out.String()
}

// runDrasat runs the drasat binary with args and returns stdout, stderr
// and its error.
func (c *cluster) runDrasat(args ...string) (string, string, error) {
	c.t.Helper()
	cmd := exec.Command(drasatBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// createNodes creates Nodes with allocatable cpu, memory and pods (there is
// no kubelet to report them) and a Ready condition.
func (c *cluster) createNodes(nodes []*corev1.Node) {
	c.t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		n = n.DeepCopy()
		n.ResourceVersion = ""
		created, err := c.admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			c.t.Fatalf("create node %s: %v", n.Name, err)
		}
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		created.Status.Capacity, created.Status.Allocatable = res, res
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "E2E", Message: "no kubelet; created by the e2e suite"}}
		updated, err := c.admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			c.t.Fatalf("node %s status: %v", n.Name, err)
		}
		// The TaintNodesByCondition admission plugin taints new nodes
		// not-ready; the node lifecycle controller would lift it once the
		// kubelet reports Ready. There is neither: lift it here.
		updated.Spec.Taints = slices.DeleteFunc(updated.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		if _, err := c.admin.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			c.t.Fatalf("node %s taints: %v", n.Name, err)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
