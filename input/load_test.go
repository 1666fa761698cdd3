package input

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const nodeA = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
const nodeB = "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n"

const classDoc = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
`

// claimDoc is a claim ns/c with two requests; the second's exactly
// block gets extra (indented 8 spaces).
func claimDoc(extra string) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec:
  devices:
    requests:
    - name: first
      exactly: {deviceClassName: gpu.example.com}
    - name: second
      exactly:
        deviceClassName: gpu.example.com
` + extra
}

const sliceDoc = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: a
  pool: {name: a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    capacity:
      memory: {value: 40Gi}
  - name: gpu-1
    capacity:
      example.com/memory: {value: 40Gx}
`

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string // substrings of the error, in order
	}{
		{name: "unknown field in a claim", input: claimDoc("        colour: blue\n"),
			want: []string{"<stdin>#1: ResourceClaim ns/c: ", `unknown field "spec.devices.requests[1].exactly.colour"`}},
		{name: "field in the wrong case", input: nodeA + "Spec: {}\n",
			want: []string{"<stdin>#1: Node a: ", `unknown field "Spec"`}},
		{name: "malformed quantity", input: sliceDoc,
			want: []string{"<stdin>#1: ResourceSlice s: field spec.devices[1].capacity[example.com/memory].value: \"40Gx\": quantities must match"}},
		{name: "wrong type", input: claimDoc("        count: many\n"),
			want: []string{`<stdin>#1: ResourceClaim ns/c: field spec.devices.requests[1].exactly.count: got string "many", want int64`}},
		{name: "wrong type in a list", input: claimDoc("        selectors: {cel: {expression: x}}\n"),
			want: []string{`<stdin>#1: ResourceClaim ns/c: field spec.devices.requests[1].exactly.selectors: got object, want []v1.DeviceSelector`}},
		{name: "no kind", input: "apiVersion: v1\nmetadata: {name: a}\n",
			want: []string{`<stdin>#1: object "a": field kind: missing`}},
		{name: "no kind in the second document", input: nodeA + "---\nmetadata: {name: b}\n",
			want: []string{`<stdin>#2: object "b": field kind: missing`}},
		{name: "no name", input: "apiVersion: v1\nkind: Node\n",
			want: []string{"<stdin>#1: Node: field metadata.name: missing"}},
		{name: "metadata of the wrong type", input: "apiVersion: v1\nkind: Node\nmetadata: {name: [a]}\n",
			want: []string{"<stdin>#1: not a Kubernetes object: field metadata.name: got array, want string"}},
		{name: "not an object", input: "- a\n- b\n",
			want: []string{"<stdin>#1: not a Kubernetes object"}},
		{name: "bad apiVersion", input: strings.Replace(classDoc, "resource.k8s.io/v1", "resource.k8s.io/v1beta1", 1),
			want: []string{`<stdin>#1: DeviceClass gpu.example.com: field apiVersion: "resource.k8s.io/v1beta1" is not supported`}},
		{name: "duplicate object", input: nodeA + "---\n" + nodeA,
			want: []string{"<stdin>#2: Node a: duplicate object, also in <stdin>#1"}},
		{name: "item of a List", input: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- apiVersion: v1\n  kind: Node\n  metadata: {name: b}\n  spec: {unschedulable: perhaps}\n",
			want: []string{`<stdin>#1 items[1]: Node b: field spec.unschedulable: got string "perhaps", want bool`}},
		{name: "objects concatenated without ---", input: nodeA + nodeB,
			want: []string{`<stdin>: document 1: duplicate key "apiVersion" (line 4 of the document) and 2 more duplicate keys; are several objects concatenated without "---" between them?`}},
		{name: "duplicate nested key", input: nodeA + "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: b\n  labels: {x: '1', x: '2'}\n",
			want: []string{`<stdin>: document 2: duplicate key "x" (line 5 of the document)`}},
		{name: "duplicate key in JSON", input: `{"apiVersion": "v1", "kind": "Node", "kind": "Node", "metadata": {"name": "a"}}`,
			want: []string{`<stdin>: document 1: duplicate key "kind"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Load([]string{"-"}, strings.NewReader(tt.input))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			msg := err.Error()
			for _, w := range tt.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("error %q does not contain %q", msg, w)
				}
				msg = msg[i+len(w):]
			}
		})
	}
}

func TestLoadDuplicateKeysInFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cat.yaml")
	// cat a.yaml b.yaml, where neither starts with "---".
	if err := os.WriteFile(path, []byte(classDoc+"---\n"+nodeA+nodeB), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load([]string{path}, nil)
	if err == nil {
		t.Fatal("no error for two objects in one document")
	}
	want := path + `: document 2: duplicate key "apiVersion"`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

func TestLoadInputs(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string // written to a temporary directory
		paths        []string          // relative to it; "-" is stdin
		stdin        string
		wantNodes    []string
		wantClasses  int
		wantClaims   int
		wantWarnings []string
		wantOrigin   map[string]string // relative file names
	}{
		{
			name:         "unknown kind is skipped with a warning",
			files:        map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n" + nodeA},
			paths:        []string{"a.yaml"},
			wantNodes:    []string{"a"},
			wantWarnings: []string{"a.yaml#1: skipping ConfigMap v1/cm (kind not used by drasat)"},
			wantOrigin:   map[string]string{"Node a": "a.yaml#2"},
		},
		{
			name: "List is unpacked, typed lists default item kind",
			files: map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n" +
				"- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n" +
				"---\napiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: b}\n"},
			paths:        []string{"list.yaml"},
			wantNodes:    []string{"a", "b"},
			wantWarnings: []string{"list.yaml#1 items[1]: skipping Secret v1/s"},
			wantOrigin:   map[string]string{"Node a": "list.yaml#1 items[0]", "Node b": "list.yaml#2 items[0]"},
		},
		{
			name: "directory: *.yaml, *.yml, *.json sorted, others ignored",
			files: map[string]string{
				"dir/b.yml":     nodeB,
				"dir/a.yaml":    nodeA,
				"dir/c.json":    `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "c"}}`,
				"dir/d.txt":     "not yaml: [",
				"dir/README.md": "# not read",
				"dir/e.yaml":    classDoc,
			},
			paths:       []string{"dir"},
			wantNodes:   []string{"a", "b", "c"},
			wantClasses: 1,
			wantOrigin:  map[string]string{"Node a": "dir/a.yaml#1", "Node b": "dir/b.yml#1", "Node c": "dir/c.json#1"},
		},
		{
			name:       "stdin via -",
			files:      map[string]string{"a.yaml": nodeA},
			paths:      []string{"a.yaml", "-"},
			stdin:      "---\n" + nodeB + "---\n" + classDoc + "---\n" + claimDoc(""),
			wantNodes:  []string{"a", "b"},
			wantClaims: 1, wantClasses: 1,
			wantOrigin: map[string]string{"Node a": "a.yaml#1", "Node b": "<stdin>#1", "ResourceClaim ns/c": "<stdin>#3"},
		},
		{
			name:       "claim namespace defaults to default",
			paths:      []string{"-"},
			stdin:      strings.Replace(claimDoc(""), ", namespace: ns", "", 1),
			wantClaims: 1,
			wantOrigin: map[string]string{"ResourceClaim default/c": "<stdin>#1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var paths []string
			for _, p := range tt.paths {
				if p != "-" {
					p = filepath.Join(dir, p)
				}
				paths = append(paths, p)
			}
			objs, warnings, err := Load(paths, strings.NewReader(tt.stdin))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var nodes []string
			for _, n := range objs.Nodes {
				nodes = append(nodes, n.Name)
			}
			if strings.Join(nodes, ",") != strings.Join(tt.wantNodes, ",") {
				t.Errorf("nodes %v, want %v", nodes, tt.wantNodes)
			}
			if len(objs.Classes) != tt.wantClasses || len(objs.Claims) != tt.wantClaims {
				t.Errorf("%d classes and %d claims, want %d and %d", len(objs.Classes), len(objs.Claims), tt.wantClasses, tt.wantClaims)
			}
			if len(warnings) != len(tt.wantWarnings) {
				t.Fatalf("warnings %q, want %q", warnings, tt.wantWarnings)
			}
			for i, w := range tt.wantWarnings {
				if !strings.HasPrefix(warnings[i], dir+string(filepath.Separator)+w) {
					t.Errorf("warning %q, want %q", warnings[i], w)
				}
			}
			for id, want := range tt.wantOrigin {
				if !strings.HasPrefix(want, "<stdin>") {
					want = filepath.Join(dir, want)
				}
				if got := objs.Origin[id]; got != want {
					t.Errorf("origin of %s: %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestLoadStdinWithoutReader(t *testing.T) {
	if _, _, err := Load([]string{"-"}, nil); err == nil || !strings.Contains(err.Error(), "-: no standard input") {
		t.Errorf("error %v, want one about standard input", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, _, err := Load([]string{path}, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s", err, path)
	}
}

// Inputs past MaxInputBytes in all fail with an error naming the input,
// instead of being read into memory.
func TestLoadInputBudget(t *testing.T) {
	l := &Loader{read: MaxInputBytes - 10}
	l.objs = &Objects{CompatibleOnlyWith: map[DeviceID]string{}, Origin: map[string]string{}}
	err := l.loadStream("big.yaml", strings.NewReader("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"))
	if err == nil || !strings.Contains(err.Error(), "big.yaml: input larger than") {
		t.Fatalf("loadStream = %v, want the input budget error", err)
	}
}
