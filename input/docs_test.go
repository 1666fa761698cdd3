package input

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// padLine returns a one-line JSON Node named name, padded with a label to
// exactly n bytes.
func padLine(name string, n int) string {
	head := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"labels":{"pad":"`, name)
	tail := `"}}}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// Every document of every supported form is read, whatever its length and
// wherever it ends; nothing is dropped silently.
func TestLoadReadsEveryDocument(t *testing.T) {
	nodeJSON := func(name string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q}}`, name)
	}
	// A YAML flow mapping on one line of n bytes, no newline.
	yamlLine := func(name string, n int) string {
		head := "{apiVersion: v1, kind: Node, metadata: {name: " + name + ", labels: {pad: "
		return head + strings.Repeat("y", n-len(head)-3) + "}}}"
	}
	tests := []struct {
		name   string
		input  string
		nodes  []string
		origin map[string]string
	}{
		{name: "jq -c: one JSON object per line",
			input: nodeJSON("a") + "\n" + nodeJSON("b") + "\n" + nodeJSON("c") + "\n",
			nodes: []string{"a", "b", "c"}, origin: map[string]string{"Node c": "<stdin>#3"}},
		{name: "JSON objects back to back on one line",
			input: nodeJSON("a") + nodeJSON("b"), nodes: []string{"a", "b"}},
		{name: "JSON objects, then a YAML document",
			input: nodeJSON("a") + "\n" + nodeJSON("b") + "\n---\n" + nodeC,
			nodes: []string{"a", "b", "c"}, origin: map[string]string{"Node c": "<stdin>#3"}},
		{name: "one-line JSON of 131,072 bytes, no newline",
			input: padLine("a", 131072), nodes: []string{"a"}},
		{name: "one-line JSON of 65,536 bytes, then another",
			input: padLine("a", 65536) + "\n" + padLine("b", 65536), nodes: []string{"a", "b"}},
		{name: "YAML line of 65,536 bytes, no newline",
			input: yamlLine("a", 65536), nodes: []string{"a"}},
		{name: "last YAML line of 131,072 bytes, no newline",
			input: nodeB + "---\n" + yamlLine("a", 131072), nodes: []string{"b", "a"}},
		{name: "YAML document end marker",
			input: nodeA + "...\n" + nodeB, nodes: []string{"a", "b"}},
		{name: "CRLF line ends and a byte order mark",
			input: "\xef\xbb\xbf" + strings.ReplaceAll(nodeA+"---\n"+nodeB, "\n", "\r\n"), nodes: []string{"a", "b"}},
		{name: "List of JSON objects per line",
			input: `{"apiVersion":"v1","kind":"List","items":[` + nodeJSON("a") + `]}` + "\n" + nodeJSON("b"),
			nodes: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, _, err := Load([]string{"-"}, strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range objs.Nodes {
				got = append(got, n.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.nodes, ",") {
				t.Fatalf("nodes %v, want %v", got, tt.nodes)
			}
			for id, want := range tt.origin {
				if objs.Origin[id] != want {
					t.Errorf("origin of %s: %q, want %q", id, objs.Origin[id], want)
				}
			}
		})
	}
}

const nodeC = "apiVersion: v1\nkind: Node\nmetadata: {name: c}\n"

// Forms that would lose objects fail, naming the document.
func TestLoadRefusesHalfReadableDocuments(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{name: "two YAML flow mappings in one document",
			input: "{apiVersion: v1, kind: Node, metadata: {name: a}}\n{apiVersion: v1, kind: Node, metadata: {name: b}}\n",
			want:  `<stdin>: document 1: more than one object or value in one document`},
		{name: "content after ---",
			input: nodeA + "--- " + "{apiVersion: v1, kind: Node, metadata: {name: b}}\n",
			want:  `<stdin>: document 2: content after "---" on the same line`},
		{name: "broken second JSON object",
			input: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}` + "\n" + `{"apiVersion":"v1","kind":"Node",` + "\n",
			want:  `<stdin>: document 2: unexpected EOF`},
		{name: "JSON value that is not an object",
			input: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}` + "\n" + `[1]`,
			want:  `<stdin>#2: not a Kubernetes object`},
		{name: "duplicate key in the second JSON object",
			input: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}` + "\n" + `{"apiVersion":"v1","kind":"Node","metadata":{"name":"b","name":"c"}}`,
			want:  `<stdin>: document 2: duplicate key "name"`},
		{name: "a line past the document limit",
			input: nodeA + "---\n" + padLine("b", MaxDocBytes+1),
			want:  `<stdin>: document 2: larger than 16777216 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Load([]string{"-"}, strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// A symlink named like an input file that points back at its directory is
// not followed into a loop (directories are read one level deep).
func TestLoadDirectorySymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(nodeA), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(dir, "loop.yaml")); err != nil {
		t.Fatal(err)
	}
	objs, _, err := Load([]string{dir}, nil)
	if err != nil || len(objs.Nodes) != 1 {
		t.Fatalf("Load: %v", err)
	}
}
