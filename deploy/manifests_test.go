package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// kustomizations that install the controller.
var kustomizations = []string{"kustomization.yaml", "namespaced/kustomization.yaml"}

var digestOnly = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// TestControllerImagePinned: both kustomizations pin the controller image
// by digest, to the same tag and digest, and (with kubectl) every
// container image they render is pinned.
func TestControllerImagePinned(t *testing.T) {
	type image struct {
		Name, NewName, NewTag, Digest string
	}
	var pins []string
	for _, k := range kustomizations {
		b, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		var kz struct {
			Images []image `json:"images"`
		}
		if err := yaml.Unmarshal(b, &kz); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		found := false
		for _, im := range kz.Images {
			if im.Name != "ghcr.io/drasat/drasat" {
				continue
			}
			found = true
			if !digestOnly.MatchString(im.Digest) {
				t.Errorf("%s: images[ghcr.io/drasat/drasat].digest %q is not sha256:<64 hex digits> (deploy/pin-image.sh sets it)", k, im.Digest)
			}
			pins = append(pins, im.NewTag+"@"+im.Digest)
		}
		if !found {
			t.Errorf("%s: no images entry pins ghcr.io/drasat/drasat", k)
		}
	}
	if len(pins) == 2 && pins[0] != pins[1] {
		t.Errorf("the kustomizations pin different images: %s and %s", pins[0], pins[1])
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found: rendered manifests not checked")
		return
	}
	for _, dir := range []string{".", "namespaced"} {
		out, err := exec.Command(kubectl, "kustomize", dir).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "- "))
			if len(f) == 2 && f[0] == "image:" {
				n++
				if !digest.MatchString(f[1]) {
					t.Errorf("kubectl kustomize %s: image %s is not pinned by digest", dir, f[1])
				}
			}
		}
		if n == 0 {
			t.Errorf("kubectl kustomize %s: no image rendered", dir)
		}
	}
}

// docs splits a manifest file into its YAML documents.
func docs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range strings.Split(string(b), "\n---") {
		out = append(out, []byte(d))
	}
	return out
}

// goMemBytes parses a GOMEMLIMIT value (a byte count with an optional
// B, KiB, MiB, GiB or TiB suffix).
func goMemBytes(s string) (int64, bool) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err == nil
		}
	}
	return 0, false
}

// TestManifestsHardened: the Deployment's standby never shares the
// leader's node, GOMEMLIMIT is a soft limit below the container's memory
// limit, the namespace enforces the restricted Pod Security profile, and
// every policy rbac.yaml names exists.
func TestManifestsHardened(t *testing.T) {
	var d appsv1.Deployment
	if err := yaml.Unmarshal(docs(t, "base/deployment.yaml")[0], &d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	hard := false
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			hard = hard || term.TopologyKey == "kubernetes.io/hostname"
		}
	}
	if !hard {
		t.Error("deployment.yaml: no required pod anti-affinity on kubernetes.io/hostname")
	}
	ctr := spec.Containers[0]
	limit := ctr.Resources.Limits.Memory()
	found := false
	for _, e := range ctr.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		found = true
		n, ok := goMemBytes(e.Value)
		if !ok || e.ValueFrom != nil {
			t.Errorf("deployment.yaml: GOMEMLIMIT %q is not a fixed byte count", e.Value)
		} else if limit.IsZero() || n >= limit.Value() || n < limit.Value()*8/10 {
			t.Errorf("deployment.yaml: GOMEMLIMIT %s (%d bytes) should be 80-99%% of the memory limit %s", e.Value, n, limit)
		}
	}
	if !found {
		t.Error("deployment.yaml: no GOMEMLIMIT")
	}
	var ns corev1.Namespace
	if err := yaml.Unmarshal(docs(t, "base/namespace.yaml")[0], &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace.yaml: Pod Security enforce %q, want restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	}
	policies := map[string]bool{}
	for _, f := range []string{"base/admission.yaml", "base/gating.yaml", "base/weight.yaml"} {
		for _, doc := range docs(t, f) {
			var o struct {
				Kind     string
				Metadata struct{ Name string }
			}
			if err := yaml.Unmarshal(doc, &o); err == nil && strings.HasSuffix(o.Kind, "AdmissionPolicy") {
				policies[o.Metadata.Name] = true
			}
		}
	}
	rbac, err := os.ReadFile("base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`AdmissionPolicy\s+(?:#\s+)?(drasat-[a-z-]+)`).FindAllStringSubmatch(string(rbac), -1)
	if len(named) == 0 {
		t.Error("rbac.yaml names no policy; the test's pattern is stale")
	}
	for _, m := range named {
		if !policies[m[1]] {
			t.Errorf("rbac.yaml names the policy %s, which deploy/base does not define", m[1])
		}
	}
}

// TestNetworkPolicyEgress: drasat may reach listed hosts (the API
// server's addresses) on the API server's ports only; no DNS, no
// rule open to every address.
func TestNetworkPolicyEgress(t *testing.T) {
	var np networkingv1.NetworkPolicy
	if err := yaml.Unmarshal(docs(t, "base/networkpolicy.yaml")[0], &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) == 0 {
		t.Fatal("networkpolicy.yaml: no egress rule (Egress in policyTypes with no rule denies all; say so explicitly)")
	}
	for i, r := range np.Spec.Egress {
		if len(r.To) == 0 {
			t.Errorf("egress[%d]: open to every address", i)
		}
		for _, to := range r.To {
			if to.IPBlock == nil || !(strings.HasSuffix(to.IPBlock.CIDR, "/32") || strings.HasSuffix(to.IPBlock.CIDR, "/128")) {
				t.Errorf("egress[%d]: %+v is not one host's address", i, to)
			}
		}
		for _, p := range r.Ports {
			if p.Port == nil || (p.Port.IntValue() != 443 && p.Port.IntValue() != 6443) {
				t.Errorf("egress[%d]: port %v is not the API server's (443, 6443)", i, p.Port)
			}
		}
		if len(r.Ports) == 0 {
			t.Errorf("egress[%d]: every port", i)
		}
	}
}
