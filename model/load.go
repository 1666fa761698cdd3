package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Limits keep a run bounded; past them loading fails with a clear error
// instead of exhausting memory.
const (
	MaxObjects  = 200_000
	MaxDocBytes = 16 << 20
)

// Loader reads Kubernetes objects the way kubectl -f does.
type Loader struct {
	Stdin    io.Reader
	Warnings []string
	objs     *Objects
	count    int
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
	sort.Strings(files)
	for _, f := range files {
		if err := l.loadPath(f); err != nil {
			return err
		}
	}
	return nil
}

func (l *Loader) loadStream(name string, r io.Reader) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64<<10))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(raw) > MaxDocBytes {
			return fmt.Errorf("%s: document %d: larger than %d bytes", name, doc, MaxDocBytes)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if string(js) == "null" {
			continue
		}
		if err := l.addObject(fmt.Sprintf("%s#%d", name, doc), js); err != nil {
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
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %w", where, err)
	}
	if tm.Kind == "" {
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
	id := tm.Kind + " " + tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		id = tm.Kind + " " + tm.Metadata.Namespace + "/" + tm.Metadata.Name
	}
	if tm.Metadata.Name == "" {
		return fmt.Errorf("%s: %s: field metadata.name: missing", where, tm.Kind)
	}
	wrap := func(err error) error { return fmt.Errorf("%s: %s: %w", where, id, err) }
	isResource := tm.Kind == "ResourceSlice" || tm.Kind == "DeviceClass" || tm.Kind == "ResourceClaim"
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

// strictUnmarshal decodes JSON into a typed object, rejecting unknown and
// duplicate fields so typos surface with the field's path.
func strictUnmarshal(js []byte, into any) error {
	if err := yaml.UnmarshalStrict(js, into); err != nil {
		return err
	}
	return nil
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
