package model

import (
	"bytes"
	"context"
	"github.com/drasat/drasat/input"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exampleFiles are the seed corpus: every input file of examples/, and
// each example directory concatenated into one stream.
func exampleFiles(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	dirs := map[string]*bytes.Buffer{}
	err := filepath.Walk("../examples", func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, b)
		d := filepath.Dir(path)
		if dirs[d] == nil {
			dirs[d] = &bytes.Buffer{}
		}
		dirs[d].Write(b)
		dirs[d].WriteString("\n---\n")
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range dirs {
		out = append(out, b.Bytes())
	}
	return out
}

// FuzzLoad feeds arbitrary bytes to the loader, the validator and the
// problem builder: none may panic or hang, and every rejected input gets a
// non-empty error naming where it is.
func FuzzLoad(f *testing.F) {
	for _, b := range exampleFiles(f) {
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{kind: Node, metadata: {name: a}}]\n"))
	f.Add([]byte("kind: ResourceSlice\napiVersion: resource.k8s.io/v1\nmetadata: {name: s}\nspec: {devices: [{name: a}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _, err := input.Load([]string{"-"}, bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			if !strings.HasPrefix(err.Error(), "<stdin>") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := Validate(ctx, objs); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if _, err := Build(context.Background(), objs, Options{}); err != nil && err.Error() == "" {
			t.Fatal("empty Build error")
		}
	})
}
