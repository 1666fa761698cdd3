package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/drasat/drasat/bench/gen"
	"sigs.k8s.io/yaml"
)

// Same input, same output: every example and a generated MIG batch large
// enough for the relaxation and best-fit path (no whole SAT model) give
// byte-identical YAML on repeated runs.
func TestSameInputSameOutput(t *testing.T) {
	var inputs []string
	for _, dir := range exampleDirs(t) {
		inputs = append(inputs, filepath.Join(examplesDir, dir))
	}
	objs := gen.MIG(gen.DefaultMIG(4, 8, 150, 7))
	var docs []byte
	for _, o := range objs.Nodes {
		docs = appendDoc(t, docs, o, "v1", "Node")
	}
	for _, o := range objs.Classes {
		docs = appendDoc(t, docs, o, "resource.k8s.io/v1", "DeviceClass")
	}
	for _, o := range objs.Slices {
		docs = appendDoc(t, docs, o, "resource.k8s.io/v1", "ResourceSlice")
	}
	for _, o := range objs.Claims {
		docs = appendDoc(t, docs, o, "resource.k8s.io/v1", "ResourceClaim")
	}
	mig := filepath.Join(t.TempDir(), "mig.yaml")
	if err := os.WriteFile(mig, docs, 0o644); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, mig)
	for _, in := range inputs {
		first, _, err := runCLI(t, "allocate", "-f", in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for i := 0; i < 2; i++ {
			again, _, err := runCLI(t, "allocate", "-f", in)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if again != first {
				t.Fatalf("%s: run %d printed a different allocation than the first", in, i+2)
			}
		}
	}
}

// appendDoc appends obj as one YAML document with its apiVersion and kind
// (generated objects leave their TypeMeta empty).
func appendDoc(t *testing.T, docs []byte, obj any, apiVersion, kind string) []byte {
	t.Helper()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	m["apiVersion"], m["kind"] = apiVersion, kind
	y, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(docs, "---\n"...), y...)
}
