package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	sigsjson "sigs.k8s.io/json"
)

// Limits keep a run bounded; past them loading fails with a clear error
// instead of exhausting memory.
const (
	MaxObjects    = 200_000
	MaxDocBytes   = 16 << 20
	MaxInputBytes = 1 << 30 // all files and stdin together
)

// Loader reads Kubernetes objects the way kubectl -f does.
type Loader struct {
	Stdin    io.Reader
	Warnings []string
	objs     *Objects
	count    int
	read     int64 // bytes read from all inputs so far
	intern   *interner
}

// budgetReader fails a read once the loader's inputs together pass
// MaxInputBytes, so no input, however large, is read into memory whole.
type budgetReader struct {
	r    io.Reader
	l    *Loader
	name string
}

// budgetError is the error past MaxInputBytes; it names the input itself.
type budgetError struct{ name string }

func (e budgetError) Error() string {
	return fmt.Sprintf("%s: input larger than %d bytes in all; split it into several runs", e.name, MaxInputBytes)
}

func (b budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.l.read += int64(n)
	if b.l.read > MaxInputBytes {
		return n, budgetError{b.name}
	}
	return n, err
}

// Load reads every path (file, directory, or "-" for stdin) into Objects.
func Load(paths []string, stdin io.Reader) (*Objects, []string, error) {
	l := &Loader{Stdin: stdin}
	objs, err := l.Load(paths)
	return objs, l.Warnings, err
}

// Load reads every path into one Objects value.
func (l *Loader) Load(paths []string) (*Objects, error) {
	l.objs = &Objects{CompatibleOnlyWith: map[DeviceID]string{}, Origin: map[string]string{}}
	for _, p := range paths {
		if err := l.loadPath(p); err != nil {
			return nil, err
		}
	}
	return l.objs, nil
}

func (l *Loader) loadPath(p string) error {
	if p == "-" {
		if l.Stdin == nil {
			return errors.New("-: no standard input")
		}
		return l.loadStream("<stdin>", l.Stdin)
	}
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return l.loadStream(p, f)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: directory holds no .yaml, .yml or .json file", p)
	}
	sort.Strings(files)
	for _, f := range files {
		// Not recursive: a directory (or a symlink to one, perhaps to
		// this very directory) named x.yaml is skipped.
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			continue
		}
		if err := l.loadPath(f); err != nil {
			return err
		}
	}
	return nil
}

// loadStream reads every document of a YAML stream; a document that is
// JSON may hold several objects one after another (`jq -c` output).
// Documents are numbered from 1 in the stream, each JSON object counting
// as one. Nothing is skipped silently: a document is read whole or the
// load fails naming it.
func (l *Loader) loadStream(name string, r io.Reader) error {
	docs := newDocSplitter(budgetReader{r, l, name})
	// Documents are decoded (YAML or JSON to JSON) by workers, a few
	// documents ahead, and added in stream order here: the objects, their
	// numbering and the first error are those of reading one by one.
	dec := newDocDecoders()
	defer dec.stop()
	var ahead []*decodedDoc
	aheadBytes, eof, first := 0, false, true
	for doc := 1; ; doc++ {
		for !eof && (len(ahead) == 0 || len(ahead) < maxDocsAhead && aheadBytes < maxBytesAhead) {
			raw, err := docs.next()
			if err == io.EOF {
				eof = true
				break
			}
			if err != nil {
				eof = true // reported in its turn
			}
			if first {
				raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
				first = false
			}
			ahead = append(ahead, dec.submit(raw, err))
			aheadBytes += len(raw)
		}
		if len(ahead) == 0 {
			return nil
		}
		d := ahead[0]
		ahead = ahead[1:]
		aheadBytes -= len(d.raw)
		<-d.done
		if d.readErr != nil {
			var be budgetError
			if errors.As(d.readErr, &be) {
				return d.readErr
			}
			return fmt.Errorf("%s: document %d: %w", name, doc, d.readErr)
		}
		if d.blank {
			continue
		}
		if d.jsonErr != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc+len(d.objs), d.jsonErr)
		}
		if d.isJSON {
			for i, js := range d.objs {
				if i > 0 {
					doc++
				}
				if err := l.addObject(fmt.Sprintf("%s#%d", name, doc), js); err != nil {
					return err
				}
			}
			continue
		}
		if d.err != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc, d.err)
		}
		if string(d.js) == "null" {
			continue
		}
		if err := l.addObject(fmt.Sprintf("%s#%d", name, doc), d.js); err != nil {
			return err
		}
	}
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (l *Loader) addObject(where string, js []byte) error {
	if t := bytes.TrimSpace(js); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%s: not a Kubernetes object (a mapping with apiVersion, kind and metadata)", where)
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %w", where,
			describeDecodeError(js, func(b []byte) error { return json.Unmarshal(b, &typeMeta{}) }, err))
	}
	if tm.Kind == "" {
		if tm.Metadata.Name != "" {
			return fmt.Errorf("%s: object %q: field kind: missing", where, tm.Metadata.Name)
		}
		return fmt.Errorf("%s: field kind: missing", where)
	}
	if tm.Kind == "List" || (strings.HasSuffix(tm.Kind, "List") && tm.Kind != "List") {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &list); err != nil {
			return fmt.Errorf("%s: %s: field items: %w", where, tm.Kind, err)
		}
		itemKind := strings.TrimSuffix(tm.Kind, "List")
		for i, item := range list.Items {
			// Typed lists may omit kind and apiVersion on items.
			if itemKind != "" {
				item = defaultTypeMeta(item, tm.APIVersion, itemKind)
			}
			if err := l.addObject(fmt.Sprintf("%s items[%d]", where, i), item); err != nil {
				return err
			}
		}
		return nil
	}
	l.count++
	if l.count > MaxObjects {
		return fmt.Errorf("%s: more than %d objects; split the input", where, MaxObjects)
	}
	if tm.APIVersion == DraftAPIVersion { // the KEP-4815 draft's slices, input/draft.go
		return l.addDraftSlice(where, tm.Kind, js)
	}
	id := tm.Kind + " " + tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		id = tm.Kind + " " + tm.Metadata.Namespace + "/" + tm.Metadata.Name
	}
	if tm.Metadata.Name == "" {
		return fmt.Errorf("%s: %s: field metadata.name: missing", where, tm.Kind)
	}
	wrap := func(err error) error { return fmt.Errorf("%s: %s: %w", where, id, err) }
	isResource := tm.Kind == "ResourceSlice" || tm.Kind == "DeviceClass" || tm.Kind == "ResourceClaim" || tm.Kind == "DeviceTaintRule"
	if isResource && tm.APIVersion != resourceapi.SchemeGroupVersion.String() {
		return wrap(fmt.Errorf("field apiVersion: %q is not supported, use %s", tm.APIVersion, resourceapi.SchemeGroupVersion))
	}
	if (tm.Kind == "Node" || tm.Kind == "Pod") && tm.APIVersion != "v1" {
		return wrap(fmt.Errorf("field apiVersion: %q is not supported, use v1", tm.APIVersion))
	}
	switch tm.Kind {
	case "ResourceSlice":
		js, exts, err := extractCompatibleOnlyWith(js)
		if err != nil {
			return wrap(err)
		}
		s := &resourceapi.ResourceSlice{}
		if err := strictUnmarshal(js, s); err != nil {
			return wrap(err)
		}
		for i, expr := range exts {
			if i >= len(s.Spec.Devices) {
				continue
			}
			if s.Spec.Pool.Name == "" {
				return wrap(errors.New("field spec.pool.name: missing"))
			}
			l.objs.CompatibleOnlyWith[DeviceID{s.Spec.Driver, s.Spec.Pool.Name, s.Spec.Devices[i].Name}] = expr
		}
		if len(exts) == 0 {
			if l.intern == nil {
				l.intern = newInterner()
			}
			l.intern.slice(s)
		}
		l.objs.Slices = append(l.objs.Slices, s)
	case "DeviceClass":
		c := &resourceapi.DeviceClass{}
		if err := strictUnmarshal(js, c); err != nil {
			return wrap(err)
		}
		l.objs.Classes = append(l.objs.Classes, c)
	case "ResourceClaim":
		c := &resourceapi.ResourceClaim{}
		if err := strictUnmarshal(js, c); err != nil {
			return wrap(err)
		}
		if c.Namespace == "" {
			c.Namespace = "default"
			id = "ResourceClaim default/" + c.Name
		}
		l.objs.Claims = append(l.objs.Claims, c)
	case "DeviceTaintRule":
		r := &resourceapi.DeviceTaintRule{}
		if err := strictUnmarshal(js, r); err != nil {
			return wrap(err)
		}
		l.objs.TaintRules = append(l.objs.TaintRules, r)
	case "Node":
		n := &corev1.Node{}
		if err := strictUnmarshal(js, n); err != nil {
			return wrap(err)
		}
		l.objs.Nodes = append(l.objs.Nodes, n)
	case "Pod":
		p := &corev1.Pod{}
		if err := strictUnmarshal(js, p); err != nil {
			return wrap(err)
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		l.objs.Pods = append(l.objs.Pods, p)
	default:
		l.Warnings = append(l.Warnings, fmt.Sprintf("%s: skipping %s %s/%s (kind not used by drasat)", where, tm.Kind, tm.APIVersion, tm.Metadata.Name))
		return nil
	}
	if prev, dup := l.objs.Origin[id]; dup {
		return wrap(fmt.Errorf("duplicate object, also in %s", prev))
	}
	l.objs.Origin[id] = where
	return nil
}

func defaultTypeMeta(item json.RawMessage, apiVersion, kind string) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(item, &m) != nil {
		return item
	}
	if _, ok := m["kind"]; !ok {
		m["kind"] = kind
	}
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"] = apiVersion
	}
	out, err := json.Marshal(m)
	if err != nil {
		return item
	}
	return out
}

// strictUnmarshal decodes JSON into a typed object the way the API server's
// strict field validation does (sigs.k8s.io/json: case-sensitive, unknown and
// duplicate fields rejected). Errors name the field by its full path.
func strictUnmarshal(js []byte, into any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, into)
	if err != nil {
		fresh := func() any { return reflect.New(reflect.TypeOf(into).Elem()).Interface() }
		return describeDecodeError(js, func(b []byte) error {
			_, err := sigsjson.UnmarshalStrict(b, fresh())
			return err
		}, err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error() // e.g. unknown field "spec.devices.requests[0].foo"
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

var typeErrorRE = regexp.MustCompile(`^json: cannot unmarshal (\S+) into Go (?:struct field \S+|value) of type (.+)$`)

// describeDecodeError names the field a decoding error is about. Type errors
// from encoding/json name the field without list indices, and errors from a
// field's own UnmarshalJSON (a malformed quantity, say) name nothing, so the
// field is found by decoding copies of the document pruned down to one path:
// at each level, the first child that fails on its own is followed.
func describeDecodeError(js []byte, decode func([]byte) error, err error) error {
	msg := err.Error()
	var root any
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	if d.Decode(&root) != nil {
		return err
	}
	fails := func(path []any, empty any) bool {
		b, err := json.Marshal(prune(root, path, empty))
		return err == nil && decode(b) != nil
	}
	var path []any
	for {
		var next []any
		switch n := at(root, path).(type) {
		case map[string]any:
			if len(path) > 0 && fails(path, map[string]any{}) {
				break // the field cannot be an object at all
			}
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				next = append(next, k)
			}
		case []any:
			if len(path) > 0 && fails(path, []any{}) {
				break // the field cannot be a list at all
			}
			for i := range n {
				next = append(next, i)
			}
		}
		found := false
		for _, step := range next {
			p := append(path[:len(path):len(path)], step)
			if fails(p, nil) {
				path, found = p, true
				break
			}
		}
		if !found {
			break
		}
	}
	if len(path) == 0 {
		return err
	}
	value := ""
	switch leaf := at(root, path).(type) {
	case map[string]any, []any:
	default:
		b, _ := json.Marshal(leaf)
		value = string(b)
	}
	if m := typeErrorRE.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("got %s, want %s", m[1], m[2])
		if value != "" {
			msg = fmt.Sprintf("got %s %s, want %s", m[1], value, m[2])
		}
	} else if value != "" {
		msg = value + ": " + msg
	}
	return fmt.Errorf("field %s: %s", fieldPath(path), msg)
}

// at returns the node a path leads to in a decoded JSON document.
func at(node any, path []any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			node = node.(map[string]any)[s]
		case int:
			node = node.([]any)[s]
		}
	}
	return node
}

// prune keeps only the nodes on path and everything below its end, which is
// replaced by end when that is not nil.
func prune(node any, path []any, end any) any {
	if len(path) == 0 {
		if end != nil {
			return end
		}
		return node
	}
	switch s := path[0].(type) {
	case string:
		return map[string]any{s: prune(node.(map[string]any)[s], path[1:], end)}
	case int:
		return []any{prune(node.([]any)[s], path[1:], end)}
	}
	return node
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// fieldPath renders a path as spec.devices[1].capacity[example.com/memory].value.
func fieldPath(path []any) string {
	var sb strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case string:
			if plainKeyRE.MatchString(s) {
				if sb.Len() > 0 {
					sb.WriteByte('.')
				}
				sb.WriteString(s)
			} else {
				sb.WriteString("[" + s + "]")
			}
		case int:
			sb.WriteString("[" + strconv.Itoa(s) + "]")
		}
	}
	return sb.String()
}

var duplicateKeyRE = regexp.MustCompile(`line (\d+): key (.+) already set in map`)

// duplicateKeyError rewrites the YAML decoder's duplicate key report
// ("yaml: unmarshal errors: line 5: key "kind" already set in map") into one
// line naming the key.
func duplicateKeyError(err error) error {
	ms := duplicateKeyRE.FindAllStringSubmatch(err.Error(), -1)
	if len(ms) == 0 {
		return err
	}
	msg := fmt.Sprintf("duplicate key %s (line %s of the document)", ms[0][2], ms[0][1])
	if len(ms) > 1 {
		msg += fmt.Sprintf(" and %d more duplicate keys", len(ms)-1)
	}
	for _, m := range ms {
		if m[2] == `"apiVersion"` || m[2] == `"kind"` {
			return errors.New(msg + `; are several objects concatenated without "---" between them?`)
		}
	}
	return errors.New(msg)
}

// extractCompatibleOnlyWith removes the research extension
// spec.devices[i].compatibleOnlyWith from a slice and returns the
// expressions by device position.
func extractCompatibleOnlyWith(js []byte) ([]byte, map[int]string, error) {
	if !bytes.Contains(js, []byte(`"compatibleOnlyWith"`)) {
		return js, nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	devices, _ := spec["devices"].([]any)
	exts := map[int]string{}
	for i, d := range devices {
		dm, _ := d.(map[string]any)
		raw, ok := dm["compatibleOnlyWith"]
		if !ok {
			continue
		}
		obj, _ := raw.(map[string]any)
		expr, _ := obj["expression"].(string)
		if expr == "" || len(obj) != 1 {
			return nil, nil, fmt.Errorf("field spec.devices[%d].compatibleOnlyWith: want {expression: <CEL>}", i)
		}
		exts[i] = expr
		delete(dm, "compatibleOnlyWith")
	}
	out, err := json.Marshal(m)
	return out, exts, err
}
