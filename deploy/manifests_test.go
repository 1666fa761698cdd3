package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

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
