// Package deploy holds the installation manifests and the image build; its
// test checks what a build cannot check until it runs on a registry.
package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var digest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// TestImagesPinned: both base images are pinned by digest, every stage
// builds from them, and the Go image is go.mod's Go version (the build runs
// with GOTOOLCHAIN=local, so another version would fail the build or, with
// an older go.mod, build with a toolchain the tests never ran with).
func TestImagesPinned(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod: no go line")
	}
	args := map[string]string{}
	toolchainLocal := false
	for _, line := range strings.Split(string(df), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "ARG" && strings.Contains(f[1], "="):
			k, v, _ := strings.Cut(f[1], "=")
			args[k] = v
		case len(f) >= 2 && f[0] == "FROM":
			img := f[1]
			if strings.HasPrefix(img, "${") {
				img = args[strings.Trim(img, "${}")]
			}
			if !digest.MatchString(img) {
				t.Errorf("Dockerfile: %q is not pinned by a sha256 digest", line)
			}
		case len(f) == 2 && f[0] == "ENV" && f[1] == "GOTOOLCHAIN=local":
			toolchainLocal = true
		}
	}
	want := "golang:" + string(goLine[1]) + "-alpine@"
	if !strings.HasPrefix(args["GO_IMAGE"], want) {
		t.Errorf("Dockerfile: GO_IMAGE %q, want %s… (go.mod's go %s)", args["GO_IMAGE"], want, goLine[1])
	}
	if args["BASE_IMAGE"] == "" {
		t.Error("Dockerfile: no BASE_IMAGE")
	}
	if !toolchainLocal {
		t.Error("Dockerfile: the build stage must set GOTOOLCHAIN=local")
	}
}
