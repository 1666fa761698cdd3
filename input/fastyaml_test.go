package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameAsExact checks the fast path against the exact one on a document:
// where the fast path answers, the exact path must read the document
// without error and to the same JSON value. It returns whether the fast
// path answered. The JSON must be the same bytes: a decoder may keep
// raw JSON (runtime.RawExtension).
func sameAsExact(t *testing.T, doc string) bool {
	t.Helper()
	fast, meta, ok := fastYAMLToJSONMeta([]byte(doc), scalarCache{})
	if !ok {
		return false
	}
	exact, err := yamlDocToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fast path read a document the exact path rejects (%v):\n%s", err, doc)
	}
	if !bytes.Equal(fast, exact) {
		t.Fatalf("fast path %s, exact path %s, on:\n%s", fast, exact, doc)
	}
	var tm typeMeta
	if meta != nil && json.Unmarshal(exact, &tm) == nil && tm != *meta {
		t.Fatalf("fast path's typeMeta %+v, encoding/json's %+v, on:\n%s", *meta, tm, doc)
	}
	return true
}

func TestFastYAMLAgreesWithExact(t *testing.T) {
	read := []string{ // the fast path must answer these
		"a: b\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels:\n    x: \"1\"\n    w: 'it''s'\n    v: a<b&c>d\n",
		"a:\n- b\n- c\n", "a:\n  - b\n  -   c   # comment\n",
		"a:\n- x: 1\n  w: []\n  z: {}\n- k:\n    - 1\n    - -2\n", "a:\n-\n  b: c\n-\n- d\n",
		"a: 0\nb: 00\nc: 0x1F\nd: 1_000\ne: 1e3\nf: .5\ng: 1.5e-3\nh: +7\ni: -0\nj: 123456789012345678901234\nk: 1.0\n",
		"a: yes\nb: No\nc: ~\nd: null\ne: off\nf: y\ng: Yes please\nh: nope\ni: TRUE\nj: tRUE\n",
		"a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 12:30\nd: 1:2:3\ne: 0b101\nf: -0b11\ng: 0o17\n",
		"a: x # comment\nb: x#y\nc: 'x # y'\nd: \"x: y\"\ne: http://example.com/a:b\n",
		"a: device.attributes['gpu.nvidia.com'].type\n  == 'gpu'\nb: one\n  two\n  three\n",
		"# head\n\na: b   \n\n# mid\nc:\n  # before\n  d: e\n",
		"a:\nb:\nc: ''\nd: \"\"\n",
		"\"quoted key\": 1\n'single': 2\n'yes': 3\n\"1\": 4\n",
		"a:b: c\nd: e:f\n", "- a\n- b\n", "a: -x\nb: --\nc: a - b\nd: a, b [c] {d}\n",
		"metadata:\n  name: a\n  namespace: b\nspec:\n  devices:\n    requests:\n    - exactly:\n        count: 2\n        deviceClassName: c\n      name: r\n",
	}
	fallback := []string{ // and leave these to the exact path
		"a: b\na: c\n", "a: &x 1\nb: *x\n", "a: !!str 1\n", "a: |\n  x\n", "a: >\n  x\n",
		"a: {b: c}\n", "a: [b]\n", "a:\tb\n", "a: b\r\n", "a: \"\\n\"\n", "a: \"x\n  y\"\n",
		"a: caf\xc3\xa9\n", "<<: {a: b}\n", "? a\n: b\n", "yes: 1\n", "1: a\n", "~: a\n",
		"a: b: c\n", "a: b\n  c: d\n", "a:\n  b\n", "  a: b\n", "a: b\n c: d\n", "- - a\n",
		"a: - b\n", "a: -\n", "%YAML 1.1\na: b\n", "a: b # c\n  d\n", "a: b\n\n  c\n",
		"a: .nan\n", "a: .inf\n", "a: -.inf\n", "x: [ ]\n", "a: b\n...x: 1\n", "y: 1\n", "a: 'x'y\n", "a: \"x\"#c\n", "a: x\n  - y\n", "a:\n  - x\n   - y\n",
		"a: x\n  -y\n", "a:  \n  b\n", "a: 1\n---\nb: 2\n", "\"a\" : b\n", "a : b\n",
	}
	for _, doc := range read {
		if !sameAsExact(t, doc) {
			t.Errorf("fast path left this to the exact path:\n%s", doc)
		}
	}
	for _, doc := range fallback {
		if _, ok := fastYAMLToJSON([]byte(doc), scalarCache{}); ok {
			t.Errorf("fast path read a document it should leave to the exact path:\n%s", doc)
		}
	}
}

// TestFastYAMLAgreesOnRandomDocuments renders random trees of tricky
// scalars in the block styles YAML writers use, with comments, blank
// lines, folded plain scalars and mistakes, and checks each document the
// fast path reads against the exact path.
func TestFastYAMLAgreesOnRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	read, total := 0, 0
	for i := 0; i < 4000; i++ {
		var sb strings.Builder
		renderMap(rng, &sb, 0, 0, true)
		total++
		if sameAsExact(t, sb.String()) {
			read++
		}
	}
	// A test that the fast path only ever declined would prove nothing.
	if read < total/4 {
		t.Fatalf("the fast path read %d of %d random documents", read, total)
	}
	t.Logf("the fast path read %d of %d random documents", read, total)
}

var trickyScalars = []string{
	"a", "gpu-0", "x y", "1", "0", "-1", "007", "1.5", "1e3", ".5", "-.inf", ".NaN", "0x10", "1_0",
	"yes", "No", "on", "OFF", "y", "n", "true", "False", "~", "null", "Null", "nul", "<<", "=",
	"2001-12-14", "12:30", "1:2", "8.0.0", "40192Mi", "'q'", "\"dq\"", "'it''s'", "\"a: b\"", "''", "\"\"",
	"x # c", "x#c", "a: b", "a:", "-", "- a", "-a", "?", "? a", ":a", "&x", "*x", "!t", "|", ">", "@", "`",
	"{}", "[]", "{a: b}", "[a]", "%x", "a,b", "[x]y", "http://h:80/p", "d['k'].v == 'x'", "é", "a\tb",
	"\"a\\\"b\"", "'multi", "9223372036854775808", "18446744073709551616", "+1", "0b11", "-0b1", "0o7",
}

var trickyKeys = []string{"a", "b", "name", "kind", "apiVersion", "metadata", "namespace", "x.y/z", "a b", "\"q\"", "'s'", "yes", "1", "~", "<<", "a:b", "-k", "k#", "'a: b'", "é"}

func pick(rng *rand.Rand, xs []string) string { return xs[rng.Intn(len(xs))] }

// scalar is mostly an ordinary value, a tricky one a time in six.
func scalar(rng *rand.Rand) string {
	if rng.Intn(6) == 0 {
		return pick(rng, trickyScalars)
	}
	return pick(rng, []string{"gpu", "40Gi", "8.0.0", "'7'", "\"x y\"", "3", "d.x == 'a'", "a<b&c", "a\"b", "a\\\\b", "true", "on"})
}

// renderMap writes a block mapping at indent ind; first says the first
// key goes on the current line (after "- ").
func renderMap(rng *rand.Rand, sb *strings.Builder, ind, depth int, first bool) {
	n := 1 + rng.Intn(4)
	for i := 0; i < n; i++ {
		if !(first && i == 0) {
			sb.WriteString(strings.Repeat(" ", ind))
		}
		key := pick(rng, trickyKeys)
		if rng.Intn(3) > 0 {
			key = fmt.Sprintf("k%d", i) // mostly plain distinct keys
		}
		sb.WriteString(key + ":")
		renderValue(rng, sb, ind, depth, true)
		if rng.Intn(8) == 0 {
			sb.WriteString(pick(rng, []string{"\n", "# c\n", strings.Repeat(" ", ind) + "# c\n", "   \n"}))
		}
	}
}

func renderValue(rng *rand.Rand, sb *strings.Builder, ind, depth int, inMap bool) {
	r := rng.Intn(10)
	if depth > 3 {
		r = 0
	}
	switch {
	case r < 5: // a scalar on the line
		sb.WriteString(" " + scalar(rng))
		if rng.Intn(10) == 0 {
			sb.WriteString(" # note")
		}
		if rng.Intn(12) == 0 { // folded onto the next line
			sb.WriteString("\n" + strings.Repeat(" ", ind+2) + scalar(rng))
		}
		sb.WriteString("\n")
	case r < 7: // a nested mapping
		sb.WriteString("\n")
		step := 2 + rng.Intn(2)
		if rng.Intn(30) == 0 {
			step = 0
		}
		renderMap(rng, sb, ind+step, depth+1, false)
	case r < 9: // a sequence, at the key's indent or further in
		sb.WriteString("\n")
		si := ind
		if rng.Intn(2) == 0 || !inMap {
			si = ind + 2
		}
		for i, n := 0, 1+rng.Intn(3); i < n; i++ {
			sb.WriteString(strings.Repeat(" ", si) + "-")
			switch rng.Intn(4) {
			case 0:
				sb.WriteString(" ")
				renderMap(rng, sb, si+2, depth+1, true)
			case 1:
				renderValue(rng, sb, si, depth+1, false)
			case 2:
				sb.WriteString(" " + scalar(rng) + "\n")
			default:
				sb.WriteString("\n")
				renderMap(rng, sb, si+2, depth+1, false)
			}
		}
	default: // nothing: null
		sb.WriteString("\n")
	}
}

// FuzzFastYAML checks any document the fast path reads against the exact
// path (go test -fuzz FuzzFastYAML ./input/ to search; plain go test runs
// the seeds).
func FuzzFastYAML(f *testing.F) {
	for _, s := range []string{
		"a: b\n", "a:\n- b: 1\n  c: yes\n", "a: x\n  y\n", "a: 'q''q'\nb: \"x\"\n", "a: {}\nb: []\nc:\n",
		"k:\n  - x # c\n  -\n    y: 1e3\n", "a: 0x1F\nb: 1_0\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) { sameAsExact(t, doc) })
}

// TestLoadFastMatchesExact loads every example and test file, generated
// instances and hostile inputs with the fast path and without it: the
// same objects, warnings and errors, byte for byte.
func TestLoadFastMatchesExact(t *testing.T) {
	var paths []string
	for _, glob := range []string{"../examples/*/*.yaml", "../testdata/*.yaml", "../testdata/*/*.yaml", "../deploy/*.yaml"} {
		m, _ := filepath.Glob(glob)
		paths = append(paths, m...)
	}
	if len(paths) < 5 {
		t.Fatalf("found only %d files to read", len(paths))
	}
	inputs := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs[p] = string(b)
	}
	hostile := []string{
		nodeA + "---\n" + nodeA, nodeA + nodeB, claimDoc("        colour: blue\n"), claimDoc("        count: many\n"), sliceDoc,
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\nKind: Pod\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  Name: b\n",
		"apiVersion: v1\nkind: Nodes\nmetadata:\n  name: a\n",
		"apiVersion: v1\nkind: NodeList\nitems:\n- metadata:\n    name: a\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: 1\n", "apiVersion: v1\nkind: Node\nmetadata:\n  name: yes\n",
		"apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: a\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels:\n    x: y\n    x: z\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\nspec:\n  unschedulable: yes\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\nspec:\n  unschedulable: perhaps\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    resources:\n      requests:\n        cpu: 2x\n",
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: a\n",
		"- a\n- b\n", "a: b\n", "kind: Node\n", "apiVersion: v1\nkind:\nmetadata:\n  name: a\n",
	}
	for i, h := range hostile {
		inputs[fmt.Sprintf("hostile %d", i)] = h
	}
	var gen bytes.Buffer
	for i, n := range []int{1, 3} { // a small generated cluster in the scale files' style
		fmt.Fprintf(&gen, "apiVersion: v1\nkind: Node\nmetadata:\n  labels:\n    nvidia.com/gpu.product: A100\n  name: n%d\nspec: {}\n---\n", i)
		fmt.Fprintf(&gen, "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s%d\nspec:\n  driver: gpu.example.com\n  nodeName: n%d\n  pool:\n    generation: 1\n    name: n%d\n    resourceSliceCount: 1\n  devices:\n", i, i, i)
		for d := 0; d < n; d++ {
			fmt.Fprintf(&gen, "  - attributes:\n      index:\n        int: %d\n      uuid:\n        string: GPU-%d-%d\n      cuda:\n        version: 8.0.0\n    capacity:\n      memory:\n        value: 40192Mi\n      ratio:\n        value: \"7\"\n    name: gpu-%d\n", d, i, d, d)
		}
		gen.WriteString("---\n")
	}
	gen.WriteString("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: c\n  namespace: default\nspec:\n  devices:\n    requests:\n    - exactly:\n        allocationMode: ExactCount\n        count: 1\n        deviceClassName: gpu.example.com\n        selectors:\n        - cel:\n            expression: device.attributes['gpu.example.com'].index\n              == 0\n      name: gpu\nstatus: {}\n")
	inputs["generated"] = gen.String()
	// Documents written as the scale files are take the fast path, all
	// of them: a fast path that declined everything would pass the
	// comparison below and save nothing.
	for _, doc := range strings.Split(gen.String(), "---\n") {
		if !sameAsExact(t, doc) {
			t.Fatalf("the fast path declined a generated document:\n%s", doc)
		}
	}

	load := func(fast bool, in string) (*Objects, []string, string) {
		defer func(was bool) { fastYAML = was }(fastYAML)
		fastYAML = fast
		objs, warn, err := Load([]string{"-"}, strings.NewReader(in))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		return objs, warn, msg
	}
	for name, in := range inputs {
		fo, fw, fe := load(true, in)
		eo, ew, ee := load(false, in)
		if fe != ee {
			t.Errorf("%s: error %q with the fast path, %q without", name, fe, ee)
		}
		if !reflect.DeepEqual(fo, eo) || !reflect.DeepEqual(fw, ew) {
			t.Errorf("%s: the fast path read other objects or warnings", name)
		}
	}
}
