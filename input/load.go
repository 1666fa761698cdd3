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
			aheadBytes += cap(raw) // what the document holds, with its spare capacity
		}
		if len(ahead) == 0 {
			return nil
		}
		d := ahead[0]
		ahead = ahead[1:]
		aheadBytes -= cap(d.raw)
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
			for i, p := range d.parsed {
				if i > 0 {
					doc++
				}
				if err := l.addParsed(fmt.Sprintf("%s#%d", name, doc), p); err != nil {
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
		if err := l.addParsed(fmt.Sprintf("%s#%d", name, doc), d.parsed[0]); err != nil {
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
	return l.addParsed(where, parseObject(js))
}

// parsedObject is a document's object as far as it can be read alone: its
// type, and for the kinds drasat reads its typed value or why not. The
// decoding workers make these ahead; addParsed takes them in stream order.
type parsedObject struct {
	js        []byte
	notObject bool  // not a mapping
	tmErr     error // apiVersion, kind or metadata of the wrong type
	tm        typeMeta
	decoded   bool           // obj, exts and err below are set
	obj       any            // *resourceapi.ResourceSlice, ... or nil: a kind drasat skips
	exts      map[int]string // a ResourceSlice's compatibleOnlyWith by device
	err       error          // the apiVersion's or the decoding's, not yet naming the object
}

// typed tells whether the object was read into a value without error.
func (p *parsedObject) typed() bool { return p.decoded && p.err == nil && p.obj != nil }

func isListKind(kind string) bool {
	return kind == "List" || (strings.HasSuffix(kind, "List") && kind != "List")
}

// parseObject reads what of an object depends on its JSON alone.
func parseObject(js []byte) *parsedObject { return parseObjectMeta(js, nil) }

// parseObjectMeta is parseObject given the object's typeMeta, when
// known, as encoding/json would read it from js.
func parseObjectMeta(js []byte, meta *typeMeta) *parsedObject {
	p := &parsedObject{js: js}
	if t := bytes.TrimSpace(js); len(t) == 0 || t[0] != '{' {
		p.notObject = true
		return p
	}
	if meta != nil {
		p.tm = *meta
	} else if err := json.Unmarshal(js, &p.tm); err != nil {
		p.tmErr = describeDecodeError(js, func(b []byte) error { return json.Unmarshal(b, &typeMeta{}) }, err)
		return p
	}
	tm := p.tm
	if tm.Kind == "" || isListKind(tm.Kind) || tm.APIVersion == DraftAPIVersion || tm.Metadata.Name == "" {
		return p // addParsed's to handle, in order
	}
	p.decoded = true
	p.obj, p.exts, p.err = decodeTyped(tm, js)
	return p
}

// decodeTyped checks an object's apiVersion and decodes it into its type;
// nil for a kind drasat does not read.
func decodeTyped(tm typeMeta, js []byte) (any, map[int]string, error) {
	isResource := tm.Kind == "ResourceSlice" || tm.Kind == "DeviceClass" || tm.Kind == "ResourceClaim" || tm.Kind == "DeviceTaintRule"
	if isResource && tm.APIVersion != resourceapi.SchemeGroupVersion.String() {
		return nil, nil, fmt.Errorf("field apiVersion: %q is not supported, use %s", tm.APIVersion, resourceapi.SchemeGroupVersion)
	}
	if (tm.Kind == "Node" || tm.Kind == "Pod") && tm.APIVersion != "v1" {
		return nil, nil, fmt.Errorf("field apiVersion: %q is not supported, use v1", tm.APIVersion)
	}
	var obj any
	var exts map[int]string
	switch tm.Kind {
	case "ResourceSlice":
		var err error
		if js, exts, err = extractCompatibleOnlyWith(js); err != nil {
			return nil, nil, err
		}
		obj = &resourceapi.ResourceSlice{}
	case "DeviceClass":
		obj = &resourceapi.DeviceClass{}
	case "ResourceClaim":
		obj = &resourceapi.ResourceClaim{}
	case "DeviceTaintRule":
		obj = &resourceapi.DeviceTaintRule{}
	case "Node":
		obj = &corev1.Node{}
	case "Pod":
		obj = &corev1.Pod{}
	default:
		return nil, nil, nil
	}
	if err := strictUnmarshal(js, obj); err != nil {
		return nil, nil, err
	}
	return obj, exts, nil
}

// addParsed adds an object read by parseObject: the checks that depend
// on the objects before it (the count, duplicates) and registering it.
func (l *Loader) addParsed(where string, p *parsedObject) error {
	js, tm := p.js, p.tm
	if p.notObject {
		return fmt.Errorf("%s: not a Kubernetes object (a mapping with apiVersion, kind and metadata)", where)
	}
	if p.tmErr != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %w", where, p.tmErr)
	}
	if tm.Kind == "" {
		if tm.Metadata.Name != "" {
			return fmt.Errorf("%s: object %q: field kind: missing", where, tm.Metadata.Name)
		}
		return fmt.Errorf("%s: field kind: missing", where)
	}
	if isListKind(tm.Kind) {
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
	if p.err != nil {
		return wrap(p.err)
	}
	switch o := p.obj.(type) {
	case *resourceapi.ResourceSlice:
		for i := range p.exts {
			if i < len(o.Spec.Devices) && o.Spec.Pool.Name == "" {
				return wrap(errors.New("field spec.pool.name: missing"))
			}
		}
		for i, expr := range p.exts {
			if i < len(o.Spec.Devices) {
				l.objs.CompatibleOnlyWith[DeviceID{o.Spec.Driver, o.Spec.Pool.Name, o.Spec.Devices[i].Name}] = expr
			}
		}
		if len(p.exts) == 0 {
			if l.intern == nil {
				l.intern = newInterner()
			}
			l.intern.slice(o)
		}
		l.objs.Slices = append(l.objs.Slices, o)
	case *resourceapi.DeviceClass:
		l.objs.Classes = append(l.objs.Classes, o)
	case *resourceapi.ResourceClaim:
		if o.Namespace == "" {
			o.Namespace = "default"
			id = "ResourceClaim default/" + o.Name
		}
		l.objs.Claims = append(l.objs.Claims, o)
	case *resourceapi.DeviceTaintRule:
		l.objs.TaintRules = append(l.objs.TaintRules, o)
	case *corev1.Node:
		l.objs.Nodes = append(l.objs.Nodes, o)
	case *corev1.Pod:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		l.objs.Pods = append(l.objs.Pods, o)
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
