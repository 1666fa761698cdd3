package input

// The draft model of KEP-4815 (composite devices with device mixins and
// consumesCapacityFrom), read from files under a drasat-specific apiVersion
// and flattened into resource.k8s.io/v1 slices with shared counters, the
// way the draft says the scheduler flattens it. docs/draft.md describes
// the format, the reading of the draft that drasat implements, and the
// errors.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DraftAPIVersion is the apiVersion of a ResourceSlice in the draft's form.
// No API server ever served it: drasat reads it from files only.
const DraftAPIVersion = "kep4815-draft.drasat.dev/v1alpha1"

// Limits the draft sets.
const (
	DraftMaxEntries       = 128 // mixins and devices of a slice together: fewer than this
	DraftMaxIncludes      = 8
	DraftMaxAttrsAndCaps  = 32 // per mixin or device, before flattening
	DraftMaxConsumesFrom  = 1
	draftExclusionCounter = "draft-subtree"
)

// DraftResourceSlice is a ResourceSlice as the KEP-4815 draft defines it.
type DraftResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              DraftSliceSpec `json:"spec"`
}

// DraftSliceSpec is the draft's ResourceSliceSpec: the v1 node selection
// and pool fields, device mixins, and basic or composite devices.
type DraftSliceSpec struct {
	Driver       string                   `json:"driver"`
	Pool         resourceapi.ResourcePool `json:"pool"`
	NodeName     *string                  `json:"nodeName,omitempty"`
	NodeSelector *corev1.NodeSelector     `json:"nodeSelector,omitempty"`
	AllNodes     *bool                    `json:"allNodes,omitempty"`
	DeviceMixins []DraftDeviceMixin       `json:"deviceMixins,omitempty"`
	Devices      []DraftDevice            `json:"devices,omitempty"`
}

// DraftDeviceMixin is a named set of attributes and capacities that
// composite devices include; it is not allocatable.
type DraftDeviceMixin struct {
	Name      string               `json:"name"`
	Composite *DraftCompositeMixin `json:"composite,omitempty"`
}

// DraftCompositeMixin is the only kind of mixin the draft defines.
type DraftCompositeMixin struct {
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity   map[resourceapi.QualifiedName]DraftCapacity               `json:"capacity,omitempty"`
}

// DraftCapacity is the draft's capacity value, `{quantity: 40Gi}`.
type DraftCapacity struct {
	Quantity resource.Quantity `json:"quantity"`
}

// DraftDevice is a device: basic or composite, exactly one.
type DraftDevice struct {
	Name      string                `json:"name"`
	Basic     *DraftBasicDevice     `json:"basic,omitempty"`
	Composite *DraftCompositeDevice `json:"composite,omitempty"`
}

// DraftBasicDevice is a device with attributes and capacities only.
type DraftBasicDevice struct {
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity   map[resourceapi.QualifiedName]DraftCapacity               `json:"capacity,omitempty"`
}

// DraftCompositeDevice includes mixins and may draw its capacity from
// another device of the same slice.
type DraftCompositeDevice struct {
	Includes             []DraftRef                                                `json:"includes,omitempty"`
	ConsumesCapacityFrom []DraftRef                                                `json:"consumesCapacityFrom,omitempty"`
	Attributes           map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity             map[resourceapi.QualifiedName]DraftCapacity               `json:"capacity,omitempty"`
}

// DraftRef names a mixin or a device of the same slice.
type DraftRef struct {
	Name string `json:"name"`
}

// FlatDraftDevice is one device of a draft slice after its mixins are
// applied: what the scheduler sees, plus the chain of sources it draws from.
type FlatDraftDevice struct {
	Name       string
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	Capacity   map[resourceapi.QualifiedName]resource.Quantity
	// Source is the device this one consumes capacity from, "" for a source.
	Source string
}

// FlattenDraftMixins applies the mixins of every device of a draft slice:
// mixins in the order listed (a later one overrides an earlier one), then
// the device's own attributes and capacities. It checks every rule the
// draft states; errors name the field.
func FlattenDraftMixins(s *DraftResourceSlice) ([]FlatDraftDevice, error) {
	spec := &s.Spec
	var errs []error
	errf := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("field %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if n := len(spec.DeviceMixins) + len(spec.Devices); n >= DraftMaxEntries {
		errf("spec", "%d mixins and devices, the draft allows fewer than %d", n, DraftMaxEntries)
	}
	mixins := map[string]*DraftCompositeMixin{}
	for i, m := range spec.DeviceMixins {
		f := fmt.Sprintf("spec.deviceMixins[%d]", i)
		if msg := DNSLabel(m.Name); m.Name == "" || msg != "" {
			errf(f+".name", "%s", orRequired(m.Name, msg))
		}
		if _, dup := mixins[m.Name]; dup {
			errf(f+".name", "mixin %q is defined twice", m.Name)
		}
		if m.Composite == nil {
			errf(f+".composite", "required (the draft's only kind of mixin)")
			continue
		}
		if n := len(m.Composite.Attributes) + len(m.Composite.Capacity); n > DraftMaxAttrsAndCaps {
			errf(f+".composite", "%d attributes and capacities, more than %d", n, DraftMaxAttrsAndCaps)
		}
		mixins[m.Name] = m.Composite
	}
	index := map[string]int{}
	for i, d := range spec.Devices {
		if _, dup := index[d.Name]; !dup {
			index[d.Name] = i
		}
	}
	out := make([]FlatDraftDevice, len(spec.Devices))
	for i, d := range spec.Devices {
		f := fmt.Sprintf("spec.devices[%d]", i)
		if msg := DNSLabel(d.Name); d.Name == "" || msg != "" {
			errf(f+".name", "%s", orRequired(d.Name, msg))
		}
		if index[d.Name] != i {
			errf(f+".name", "device %q is defined twice (also spec.devices[%d])", d.Name, index[d.Name])
		}
		fd := FlatDraftDevice{Name: d.Name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
			Capacity: map[resourceapi.QualifiedName]resource.Quantity{}}
		apply := func(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, caps map[resourceapi.QualifiedName]DraftCapacity) {
			for k, v := range attrs {
				fd.Attributes[k] = v
			}
			for k, v := range caps {
				fd.Capacity[k] = v.Quantity
			}
		}
		switch {
		case d.Basic != nil && d.Composite != nil:
			errf(f, "basic and composite are both set; a device is exactly one of them")
		case d.Basic != nil:
			if n := len(d.Basic.Attributes) + len(d.Basic.Capacity); n > DraftMaxAttrsAndCaps {
				errf(f+".basic", "%d attributes and capacities, more than %d", n, DraftMaxAttrsAndCaps)
			}
			apply(d.Basic.Attributes, d.Basic.Capacity)
		case d.Composite != nil:
			c := d.Composite
			cf := f + ".composite"
			if n := len(c.Attributes) + len(c.Capacity); n > DraftMaxAttrsAndCaps {
				errf(cf, "%d attributes and capacities, more than %d", n, DraftMaxAttrsAndCaps)
			}
			if len(c.Includes) > DraftMaxIncludes {
				errf(cf+".includes", "%d mixins, the draft allows at most %d", len(c.Includes), DraftMaxIncludes)
			}
			for j, ref := range c.Includes {
				m, ok := mixins[ref.Name]
				if !ok {
					errf(fmt.Sprintf("%s.includes[%d].name", cf, j), "no mixin %q in this ResourceSlice (the draft allows mixins of the same slice only)", ref.Name)
					continue
				}
				apply(m.Attributes, m.Capacity)
			}
			apply(c.Attributes, c.Capacity)
			if len(c.ConsumesCapacityFrom) > DraftMaxConsumesFrom {
				errf(cf+".consumesCapacityFrom", "%d entries, the draft allows only one", len(c.ConsumesCapacityFrom))
			}
			if len(c.ConsumesCapacityFrom) > 0 {
				ref := c.ConsumesCapacityFrom[0].Name
				if _, ok := index[ref]; !ok {
					errf(cf+".consumesCapacityFrom[0].name", "no device %q in this ResourceSlice (the draft allows references within one slice only)", ref)
				} else if ref != d.Name { // naming itself halts the recursion: a source
					fd.Source = ref
				}
			}
		default:
			errf(f, "one of basic or composite is required")
		}
		out[i] = fd
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Cycles: follow each chain; one longer than the device count loops.
	for i, d := range out {
		seen := map[string]bool{d.Name: true}
		path := []string{d.Name}
		for cur := d.Source; cur != ""; cur = out[index[cur]].Source {
			path = append(path, cur)
			if seen[cur] {
				return nil, fmt.Errorf("field spec.devices[%d].composite.consumesCapacityFrom: cycle %s (the draft forbids cycles: every chain ends at a source)", i, strings.Join(path, " -> "))
			}
			seen[cur] = true
		}
	}
	return out, nil
}

func orRequired(name, msg string) string {
	if name == "" {
		return "required"
	}
	return msg
}

// draftCounterName turns a capacity name (a C identifier, maybe with a
// domain) into a counter name (a DNS label): memorySlice0 -> memory-slice0,
// example.com/copyEngines -> example-com-copy-engines.
func draftCounterName(c resourceapi.QualifiedName) string {
	var sb strings.Builder
	for i, r := range string(c) {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 && !strings.HasSuffix(sb.String(), "-") {
				sb.WriteByte('-')
			}
			sb.WriteRune(r - 'A' + 'a')
		case r == '.' || r == '/' || r == '_':
			if !strings.HasSuffix(sb.String(), "-") {
				sb.WriteByte('-')
			}
		default:
			sb.WriteRune(r)
		}
	}
	return strings.Trim(sb.String(), "-")
}

// FlattenDraft turns a draft slice into two resource.k8s.io/v1 slices of
// the same pool: one with a counter set per source device that some device
// draws from, one with the devices. The pool's slice count is doubled, so
// a pool is complete when all its draft slices are read.
//
// The counters: a source S's set holds S's capacities (as counters named
// by draftCounterName). S consumes all of its set; a device D consumes its
// own capacities from the set of every device on its chain of sources (the
// draft: "this applies recursively"), so D and any device above or below
// it exclude each other as soon as D draws something, and the devices
// below S together draw at most S's capacity. When some device below S
// draws nothing from S's capacities, S's set gets one more counter,
// draft-subtree, of which S takes all and every device below it one, so
// that S still excludes them.
func FlattenDraft(s *DraftResourceSlice) ([]*resourceapi.ResourceSlice, error) {
	flat, err := FlattenDraftMixins(s)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i, d := range flat {
		index[d.Name] = i
	}
	chain := func(i int) []int { // sources above device i, nearest first
		var c []int
		for cur := flat[i].Source; cur != ""; cur = flat[index[cur]].Source {
			c = append(c, index[cur])
		}
		return c
	}
	chains := make([][]int, len(flat))
	below := make([][]int, len(flat)) // devices drawing from each source
	for i := range flat {
		chains[i] = chain(i)
		for _, a := range chains[i] {
			below[a] = append(below[a], i)
		}
	}
	// Counter names of each source, checked for collisions.
	names := make([]map[resourceapi.QualifiedName]string, len(flat))
	for i := range flat {
		if len(below[i]) == 0 {
			continue
		}
		names[i] = map[resourceapi.QualifiedName]string{}
		byCounter := map[string]resourceapi.QualifiedName{}
		for _, c := range slices.Sorted(maps.Keys(flat[i].Capacity)) {
			n := draftCounterName(c)
			if msg := DNSLabel(n); msg != "" || n == draftExclusionCounter {
				return nil, fmt.Errorf("device %s: capacity %s: its counter name %q is not usable: %s", flat[i].Name, c, n, orRequired("x", msg))
			}
			if prev, dup := byCounter[n]; dup {
				return nil, fmt.Errorf("device %s: capacities %s and %s map to the same counter %q", flat[i].Name, prev, c, n)
			}
			byCounter[n] = c
			names[i][c] = n
		}
	}
	draws := func(d, src int) map[string]resourceapi.Counter {
		out := map[string]resourceapi.Counter{}
		for c, q := range flat[d].Capacity {
			if n, ok := names[src][c]; ok && q.Sign() > 0 {
				out[n] = resourceapi.Counter{Value: q.DeepCopy()}
			}
		}
		return out
	}
	exclusion := make([]bool, len(flat))
	for i := range flat {
		for _, d := range below[i] {
			if len(draws(d, i)) == 0 {
				exclusion[i] = true
			}
		}
	}
	setOf := func(i int) map[string]resourceapi.Counter {
		out := map[string]resourceapi.Counter{}
		for c, n := range names[i] {
			out[n] = resourceapi.Counter{Value: flat[i].Capacity[c].DeepCopy()}
		}
		if exclusion[i] {
			out[draftExclusionCounter] = resourceapi.Counter{Value: *resource.NewQuantity(int64(len(below[i])), resource.DecimalSI)}
		}
		return out
	}
	meta := func(suffix string) metav1.ObjectMeta {
		m := *s.ObjectMeta.DeepCopy()
		m.Name += suffix
		return m
	}
	pool := s.Spec.Pool
	pool.ResourceSliceCount *= 2
	spec := func() resourceapi.ResourceSliceSpec {
		return resourceapi.ResourceSliceSpec{Driver: s.Spec.Driver, Pool: pool, NodeName: s.Spec.NodeName,
			NodeSelector: s.Spec.NodeSelector.DeepCopy(), AllNodes: s.Spec.AllNodes}
	}
	tm := metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"}
	counters := &resourceapi.ResourceSlice{TypeMeta: tm, ObjectMeta: meta("-counters"), Spec: spec()}
	devices := &resourceapi.ResourceSlice{TypeMeta: tm, ObjectMeta: meta(""), Spec: spec()}
	for i := range flat {
		if len(below[i]) > 0 {
			counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, resourceapi.CounterSet{Name: flat[i].Name, Counters: setOf(i)})
		}
	}
	for i, d := range flat {
		dev := resourceapi.Device{Name: d.Name, Attributes: d.Attributes}
		if len(d.Capacity) > 0 {
			dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
			for c, q := range d.Capacity {
				dev.Capacity[c] = resourceapi.DeviceCapacity{Value: q.DeepCopy()}
			}
		}
		if len(below[i]) > 0 {
			dev.ConsumesCounters = append(dev.ConsumesCounters, resourceapi.DeviceCounterConsumption{CounterSet: d.Name, Counters: setOf(i)})
		}
		for _, a := range chains[i] {
			cs := draws(i, a)
			if exclusion[a] {
				cs[draftExclusionCounter] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
			}
			dev.ConsumesCounters = append(dev.ConsumesCounters, resourceapi.DeviceCounterConsumption{CounterSet: flat[a].Name, Counters: cs})
		}
		devices.Spec.Devices = append(devices.Spec.Devices, dev)
	}
	return []*resourceapi.ResourceSlice{counters, devices}, nil
}

// addDraftSlice is the loader's hook for objects of DraftAPIVersion: it
// decodes a draft ResourceSlice strictly, flattens it, and adds the v1
// slices it becomes (and the draft itself, for the checker).
func (l *Loader) addDraftSlice(where, kind string, js []byte) error {
	var tm typeMeta
	_ = json.Unmarshal(js, &tm)
	id := kind + " " + tm.Metadata.Name
	wrap := func(err error) error { return fmt.Errorf("%s: %s (%s): %w", where, id, DraftAPIVersion, err) }
	if kind != "ResourceSlice" {
		return wrap(fmt.Errorf("field kind: %q is not supported under %s, use ResourceSlice", kind, DraftAPIVersion))
	}
	if tm.Metadata.Name == "" {
		return wrap(errors.New("field metadata.name: missing"))
	}
	ds := &DraftResourceSlice{}
	if err := strictUnmarshal(js, ds); err != nil {
		return wrap(err)
	}
	if ds.Spec.Pool.Name == "" {
		return wrap(errors.New("field spec.pool.name: missing"))
	}
	slices, err := FlattenDraft(ds)
	if err != nil {
		return wrap(err)
	}
	for _, s := range slices {
		sid := "ResourceSlice " + s.Name
		if prev, dup := l.objs.Origin[sid]; dup {
			return wrap(fmt.Errorf("duplicate object %s, also in %s", sid, prev))
		}
		l.objs.Origin[sid] = where
		l.objs.Slices = append(l.objs.Slices, s)
	}
	l.objs.Draft = append(l.objs.Draft, ds)
	return nil
}
