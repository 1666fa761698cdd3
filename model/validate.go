package model

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Severity of a validation finding.
const (
	SeverityError   = "error"   // the API server or the allocator rejects or ignores it
	SeverityWarning = "warning" // accepted, but probably not what the driver meant
)

// Finding is one problem `drasat validate` found in the ResourceSlices.
type Finding struct {
	Severity string `json:"severity"`
	// Origin is where the slice was read ("file.yaml#3").
	Origin string `json:"origin,omitempty"`
	Slice  string `json:"slice,omitempty"`
	// Pool is "driver/pool".
	Pool    string `json:"pool,omitempty"`
	Device  string `json:"device,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	var sb strings.Builder
	sb.WriteString(f.Severity + ": ")
	if f.Origin != "" {
		sb.WriteString(f.Origin + ": ")
	}
	if f.Slice != "" {
		sb.WriteString("ResourceSlice " + f.Slice + ": ")
	} else if f.Pool != "" {
		sb.WriteString("pool " + f.Pool + ": ")
	}
	if f.Device != "" {
		sb.WriteString("device " + f.Device + ": ")
	}
	if f.Field != "" {
		sb.WriteString("field " + f.Field + ": ")
	}
	sb.WriteString(f.Message)
	return sb.String()
}

// maxOverlapFindings bounds the overlap findings per pool: one broken
// counter layout otherwise yields one finding per device pair.
const maxOverlapFindings = 20

// Validate checks the ResourceSlices of objs the way the API server
// (k8s.io/kubernetes pkg/apis/resource/validation, v1.37) and the
// scheduler's allocator (pool validation) would, plus checks for devices
// that can never be allocated and overlapping multi-host partitions without
// a shared counter. Findings come in input order, slice checks first, then
// pool checks. It fails only when ctx ends.
func Validate(ctx context.Context, objs *input.Objects) ([]Finding, error) {
	v := &validator{objs: objs}
	for i, s := range objs.Slices {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, validationStopped(ctx)
		}
		v.slice(s)
	}
	if err := v.pools(ctx); err != nil {
		return nil, err
	}
	return v.out, nil
}

type validator struct {
	objs *input.Objects
	out  []Finding
}

func (v *validator) sliceOrigin(s *resourceapi.ResourceSlice) string {
	return v.objs.Origin["ResourceSlice "+s.Name]
}

// add records a finding about slice s (device "" for the slice itself).
func (v *validator) add(sev string, s *resourceapi.ResourceSlice, device, field, format string, args ...any) {
	v.out = append(v.out, Finding{Severity: sev, Origin: v.sliceOrigin(s), Slice: s.Name,
		Pool: s.Spec.Driver + "/" + s.Spec.Pool.Name, Device: device, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) errorf(s *resourceapi.ResourceSlice, device, field, format string, args ...any) {
	v.add(SeverityError, s, device, field, format, args...)
}

var cIdentifierRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// qualifiedName checks an attribute or capacity name: a C identifier of at
// most 32 characters, optionally prefixed by a DNS subdomain and "/".
func qualifiedName(name string) string {
	id := name
	if i := strings.Index(name, "/"); i >= 0 {
		domain := name[:i]
		id = name[i+1:]
		if domain == "" {
			return fmt.Sprintf("%q: the domain must not be empty", name)
		}
		if len(domain) > resourceapi.DeviceMaxDomainLength {
			return fmt.Sprintf("%q: the domain is longer than %d characters", name, resourceapi.DeviceMaxDomainLength)
		}
		if msg := input.DNSSubdomain(domain); msg != "" {
			return msg
		}
	}
	if id == "" {
		return fmt.Sprintf("%q: the name must not be empty", name)
	}
	if len(id) > resourceapi.DeviceMaxIDLength {
		return fmt.Sprintf("%q: the name is longer than %d characters", name, resourceapi.DeviceMaxIDLength)
	}
	if !cIdentifierRE.MatchString(id) {
		return fmt.Sprintf("%q: the name must be a C identifier", name)
	}
	return ""
}

var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

// slice runs the API server's checks of one ResourceSlice.
func (v *validator) slice(s *resourceapi.ResourceSlice) {
	spec := &s.Spec
	if msg := input.DNSSubdomain(s.Name); msg != "" {
		v.errorf(s, "", "metadata.name", "%s", msg)
	}
	switch {
	case spec.Driver == "":
		v.errorf(s, "", "spec.driver", "required")
	case len(spec.Driver) > resourceapi.DriverNameMaxLength:
		v.errorf(s, "", "spec.driver", "longer than %d characters", resourceapi.DriverNameMaxLength)
	default:
		if msg := input.DNSSubdomain(strings.ToLower(spec.Driver)); msg != "" {
			v.errorf(s, "", "spec.driver", "%s", msg)
		}
	}
	if spec.Pool.Name == "" {
		v.errorf(s, "", "spec.pool.name", "required")
	} else {
		if len(spec.Pool.Name) > resourceapi.PoolNameMaxLength {
			v.errorf(s, "", "spec.pool.name", "longer than %d characters", resourceapi.PoolNameMaxLength)
		}
		for _, part := range strings.Split(spec.Pool.Name, "/") {
			if msg := input.DNSSubdomain(part); msg != "" {
				v.errorf(s, "", "spec.pool.name", "%s", msg)
			}
		}
	}
	if spec.Pool.ResourceSliceCount <= 0 {
		v.errorf(s, "", "spec.pool.resourceSliceCount", "%d: must be greater than zero", spec.Pool.ResourceSliceCount)
	}
	if spec.Pool.Generation < 0 {
		v.errorf(s, "", "spec.pool.generation", "%d: must not be negative", spec.Pool.Generation)
	}
	v.nodeSelection(s)
	if spec.SharedCounters != nil && spec.Devices != nil {
		v.errorf(s, "", "spec", "sharedCounters and devices are both set; a slice has one or the other (publish the counters in a slice of their own)")
	}
	maxDevices, why := resourceapi.ResourceSliceMaxDevices, ""
	for i := range spec.Devices {
		d := &spec.Devices[i]
		switch {
		case len(d.Taints) > 0:
			why = "device " + d.Name + " has taints"
		case len(d.ConsumesCounters) > 0:
			why = "device " + d.Name + " consumes counters"
		case hasListAttributes(d):
			why = "device " + d.Name + " has list attributes"
		}
		if why != "" {
			maxDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			break
		}
	}
	if len(spec.Devices) > maxDevices {
		if why != "" {
			v.errorf(s, "", "spec.devices", "%d devices, more than %d (the limit when any device has taints, consumes counters or has list attributes; %s)", len(spec.Devices), maxDevices, why)
		} else {
			v.errorf(s, "", "spec.devices", "%d devices, more than %d", len(spec.Devices), maxDevices)
		}
	}
	if len(spec.SharedCounters) > resourceapi.ResourceSliceMaxCounterSets {
		v.errorf(s, "", "spec.sharedCounters", "%d counter sets, more than %d", len(spec.SharedCounters), resourceapi.ResourceSliceMaxCounterSets)
	}
	setNames := map[string]bool{}
	for i := range spec.SharedCounters {
		cs := &spec.SharedCounters[i]
		f := fmt.Sprintf("spec.sharedCounters[%d]", i)
		if cs.Name == "" {
			v.errorf(s, "", f+".name", "required")
		} else if msg := input.DNSLabel(cs.Name); msg != "" {
			v.errorf(s, "", f+".name", "%s", msg)
		}
		if setNames[cs.Name] {
			v.errorf(s, "", f+".name", "counter set %q is defined twice in this slice", cs.Name)
		}
		setNames[cs.Name] = true
		if len(cs.Counters) == 0 {
			v.errorf(s, "", f+".counters", "required: a counter set needs at least one counter")
		}
		if len(cs.Counters) > resourceapi.ResourceSliceMaxCountersPerCounterSet {
			v.errorf(s, "", f+".counters", "%d counters, more than %d", len(cs.Counters), resourceapi.ResourceSliceMaxCountersPerCounterSet)
		}
		for _, c := range sortedKeys(cs.Counters) {
			if msg := input.DNSLabel(c); msg != "" {
				v.errorf(s, "", f+".counters["+c+"]", "%s", msg)
			}
			if q := cs.Counters[c].Value; q.Sign() < 0 {
				v.errorf(s, "", f+".counters["+c+"].value", "%s is negative", q.String())
			}
		}
	}
	names := map[string]int{}
	for i := range spec.Devices {
		v.device(s, i, names)
	}
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasListAttributes(d *resourceapi.Device) bool {
	for _, a := range d.Attributes {
		if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
			return true
		}
	}
	return false
}

func (v *validator) nodeSelection(s *resourceapi.ResourceSlice) {
	spec := &s.Spec
	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName == "" {
			v.errorf(s, "", "spec.nodeName", "must be unset or a node name, not empty")
		} else {
			set = append(set, "nodeName")
			if msg := input.DNSSubdomain(*spec.NodeName); msg != "" {
				v.errorf(s, "", "spec.nodeName", "%s", msg)
			}
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "nodeSelector")
		if n := len(spec.NodeSelector.NodeSelectorTerms); n != 1 {
			v.errorf(s, "", "spec.nodeSelector.nodeSelectorTerms", "%d terms: must have exactly one node selector term", n)
		}
		if _, err := nodeaffinity.NewNodeSelector(spec.NodeSelector); err != nil {
			v.errorf(s, "", "spec.nodeSelector", "%v", err)
		}
	}
	if spec.AllNodes != nil {
		if *spec.AllNodes {
			set = append(set, "allNodes")
		} else {
			v.errorf(s, "", "spec.allNodes", "must be unset or true")
		}
	}
	if spec.PerDeviceNodeSelection != nil {
		if *spec.PerDeviceNodeSelection {
			set = append(set, "perDeviceNodeSelection")
		} else {
			v.errorf(s, "", "spec.perDeviceNodeSelection", "must be unset or true")
		}
	}
	switch len(set) {
	case 0:
		v.errorf(s, "", "spec", "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, none is set (a slice with only sharedCounters needs one too)")
	case 1:
	default:
		v.errorf(s, "", "spec", "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, but %s are set", strings.Join(set, ", "))
	}
}

func (v *validator) device(s *resourceapi.ResourceSlice, i int, names map[string]int) {
	d := &s.Spec.Devices[i]
	f := fmt.Sprintf("spec.devices[%d]", i)
	name := d.Name
	if name == "" {
		v.errorf(s, "", f+".name", "required")
	} else if msg := input.DNSLabel(name); msg != "" {
		v.errorf(s, name, f+".name", "%s", msg)
	}
	if j, dup := names[name]; dup && name != "" {
		v.errorf(s, name, f+".name", "device name %q is also used by spec.devices[%d] of this slice", name, j)
	} else {
		names[name] = i
	}
	if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		v.errorf(s, name, f, "%d attributes and capacities, more than %d", n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
	}
	values := 0
	for _, k := range sortedQualified(d.Attributes) {
		a := d.Attributes[resourceapi.QualifiedName(k)]
		af := f + ".attributes[" + k + "]"
		if msg := qualifiedName(k); msg != "" {
			v.errorf(s, name, af, "%s", msg)
		}
		n, kinds := 0, 0
		for _, set := range []bool{a.BoolValue != nil, a.IntValue != nil, a.StringValue != nil, a.VersionValue != nil} {
			if set {
				kinds++
				n = 1
			}
		}
		lists := []int{len(a.BoolValues), len(a.IntValues), len(a.StringValues), len(a.VersionValues)}
		for j, set := range []bool{a.BoolValues != nil, a.IntValues != nil, a.StringValues != nil, a.VersionValues != nil} {
			if set {
				kinds++
				n += lists[j]
				if lists[j] == 0 {
					v.errorf(s, name, af, "a list value must not be empty")
				}
			}
		}
		values += max(n, 1)
		if kinds != 1 {
			v.errorf(s, name, af, "exactly one value must be set, found %d", kinds)
		}
		if a.StringValue != nil && len(*a.StringValue) > resourceapi.DeviceAttributeMaxValueLength {
			v.errorf(s, name, af+".string", "longer than %d characters", resourceapi.DeviceAttributeMaxValueLength)
		}
		for _, sv := range a.StringValues {
			if len(sv) > resourceapi.DeviceAttributeMaxValueLength {
				v.errorf(s, name, af+".strings", "a value is longer than %d characters", resourceapi.DeviceAttributeMaxValueLength)
			}
		}
		if a.VersionValue != nil && !semverRE.MatchString(*a.VersionValue) {
			v.errorf(s, name, af+".version", "%q is not a semantic version (semver.org 2.0.0)", *a.VersionValue)
		}
		for _, vv := range a.VersionValues {
			if !semverRE.MatchString(vv) {
				v.errorf(s, name, af+".versions", "%q is not a semantic version (semver.org 2.0.0)", vv)
			}
		}
	}
	if values > resourceapi.ResourceSliceMaxAttributeValuesPerDevice {
		v.errorf(s, name, f+".attributes", "%d attribute values, more than %d", values, resourceapi.ResourceSliceMaxAttributeValuesPerDevice)
	}
	for _, k := range sortedQualified(d.Capacity) {
		if msg := qualifiedName(k); msg != "" {
			v.errorf(s, name, f+".capacity["+k+"]", "%s", msg)
		}
	}
	// Negative values and request policies the API server rejects.
	for _, e := range CapacityPolicyErrors(d) {
		field, msg, _ := strings.Cut(e, ": ")
		v.errorf(s, name, f+"."+field, "%s", msg)
	}
	if len(d.Taints) > resourceapi.DeviceTaintsMaxLength {
		v.errorf(s, name, f+".taints", "%d taints, more than %d", len(d.Taints), resourceapi.DeviceTaintsMaxLength)
	}
	if len(d.BindingConditions) > resourceapi.BindingConditionsMaxSize {
		v.errorf(s, name, f+".bindingConditions", "%d entries, more than %d", len(d.BindingConditions), resourceapi.BindingConditionsMaxSize)
	}
	if len(d.BindingFailureConditions) > resourceapi.BindingFailureConditionsMaxSize {
		v.errorf(s, name, f+".bindingFailureConditions", "%d entries, more than %d", len(d.BindingFailureConditions), resourceapi.BindingFailureConditionsMaxSize)
	}
	if len(d.ConsumesCounters) > resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
		v.errorf(s, name, f+".consumesCounters", "%d entries, more than %d", len(d.ConsumesCounters), resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice)
	}
	sets := map[string]bool{}
	for j, cc := range d.ConsumesCounters {
		cf := fmt.Sprintf("%s.consumesCounters[%d]", f, j)
		if cc.CounterSet == "" {
			v.errorf(s, name, cf+".counterSet", "required")
		} else if msg := input.DNSLabel(cc.CounterSet); msg != "" {
			v.errorf(s, name, cf+".counterSet", "%s", msg)
		}
		if sets[cc.CounterSet] {
			v.errorf(s, name, cf+".counterSet", "counter set %q is consumed twice by this device; use one entry", cc.CounterSet)
		}
		sets[cc.CounterSet] = true
		if len(cc.Counters) == 0 {
			v.errorf(s, name, cf+".counters", "required: at least one counter")
		}
		if len(cc.Counters) > resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption {
			v.errorf(s, name, cf+".counters", "%d counters, more than %d", len(cc.Counters), resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption)
		}
		for _, c := range sortedKeys(cc.Counters) {
			if msg := input.DNSLabel(c); msg != "" {
				v.errorf(s, name, cf+".counters["+c+"]", "%s", msg)
			}
			if q := cc.Counters[c].Value; q.Sign() < 0 {
				v.errorf(s, name, cf+".counters["+c+"].value", "%s is negative", q.String())
			}
		}
		if len(cc.CompatibilityGroups) > resourceapi.DeviceCompatibilityGroupsMaxSize {
			v.errorf(s, name, cf+".compatibilityGroups", "%d groups, more than %d", len(cc.CompatibilityGroups), resourceapi.DeviceCompatibilityGroupsMaxSize)
		}
		seen := map[string]bool{}
		for k, g := range cc.CompatibilityGroups {
			gf := fmt.Sprintf("%s.compatibilityGroups[%d]", cf, k)
			if msg := input.DNSLabel(g); msg != "" {
				v.errorf(s, name, gf, "%s", msg)
			}
			if seen[g] {
				v.errorf(s, name, gf, "group %q is listed twice", g)
			}
			seen[g] = true
		}
	}
	perDevice := s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection
	var set []string
	if d.NodeName != nil {
		if *d.NodeName == "" {
			v.errorf(s, name, f+".nodeName", "must not be empty")
		} else {
			set = append(set, "nodeName")
			if msg := input.DNSSubdomain(*d.NodeName); msg != "" {
				v.errorf(s, name, f+".nodeName", "%s", msg)
			}
		}
	}
	if d.NodeSelector != nil {
		set = append(set, "nodeSelector")
		if _, err := nodeaffinity.NewNodeSelector(d.NodeSelector); err != nil {
			v.errorf(s, name, f+".nodeSelector", "%v", err)
		}
	}
	if d.AllNodes != nil {
		if *d.AllNodes {
			set = append(set, "allNodes")
		} else {
			v.errorf(s, name, f+".allNodes", "must be unset or true")
		}
	}
	switch {
	case !perDevice && (d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil):
		v.errorf(s, name, f, "nodeName, nodeSelector and allNodes can only be set on a device when the slice sets perDeviceNodeSelection: true")
	case perDevice && len(set) == 0:
		v.errorf(s, name, f, "exactly one of nodeName, nodeSelector, allNodes is required because the slice sets perDeviceNodeSelection: true")
	case perDevice && len(set) > 1:
		v.errorf(s, name, f, "exactly one of nodeName, nodeSelector, allNodes is required, but %s are set", strings.Join(set, ", "))
	}
}

func sortedQualified[T any](m map[resourceapi.QualifiedName]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return keys
}

// pools runs the allocator's pool checks (generations, completeness, unique
// names, counter references) and drasat's capacity and overlap checks.
func (v *validator) pools(ctx context.Context) error {
	byPool := map[poolKey][]*resourceapi.ResourceSlice{}
	var keys []poolKey
	for _, s := range v.objs.Slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if byPool[k] == nil {
			keys = append(keys, k)
		}
		byPool[k] = append(byPool[k], s)
	}
	nodes := v.nodeNames()
	for _, k := range keys {
		if ctx.Err() != nil {
			return validationStopped(ctx)
		}
		cur, gen := newestGeneration(byPool[k])
		for _, s := range byPool[k] {
			if s.Spec.Pool.Generation == gen {
				continue
			}
			v.add(SeverityWarning, s, "", "spec.pool.generation", "generation %d is superseded by generation %d of the pool; the allocator ignores this slice", s.Spec.Pool.Generation, gen)
		}
		want := cur[0].Spec.Pool.ResourceSliceCount
		consistent := true
		for _, s := range cur[1:] {
			if s.Spec.Pool.ResourceSliceCount != want {
				v.errorf(s, "", "spec.pool.resourceSliceCount", "%d, but slice %s of the same generation says %d", s.Spec.Pool.ResourceSliceCount, cur[0].Name, want)
				consistent = false
			}
		}
		if consistent && int64(len(cur)) != want {
			names := make([]string, len(cur))
			for i, s := range cur {
				names[i] = s.Name
			}
			v.out = append(v.out, Finding{Severity: SeverityError, Origin: v.sliceOrigin(cur[0]), Pool: k.Driver + "/" + k.Pool, Field: "spec.pool.resourceSliceCount",
				Message: fmt.Sprintf("incomplete pool: generation %d has %d of %d slices (%s); the allocator does not use it", gen, len(cur), want, strings.Join(names, ", "))})
		}
		if err := CounterQuantitiesFit(cur, 1); err != nil {
			v.out = append(v.out, Finding{Severity: SeverityWarning, Origin: v.sliceOrigin(cur[0]), Pool: k.Driver + "/" + k.Pool, Field: "spec.sharedCounters",
				Message: err.Error()})
		}
		if err := v.pool(ctx, k, cur, nodes); err != nil {
			return err
		}
	}
	return nil
}

type sliceDevice struct {
	s   *resourceapi.ResourceSlice
	i   int
	dev *resourceapi.Device
}

func (sd sliceDevice) field() string { return fmt.Sprintf("spec.devices[%d]", sd.i) }

func (v *validator) pool(ctx context.Context, k poolKey, slices []*resourceapi.ResourceSlice, nodes nodeIndex) error {
	type setDef struct {
		s  *resourceapi.ResourceSlice
		i  int
		cs *resourceapi.CounterSet
	}
	sets := map[string]setDef{}
	for _, s := range slices {
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			if prev, dup := sets[cs.Name]; dup {
				if prev.s != s { // duplicates within one slice are reported by slice()
					v.errorf(s, "", fmt.Sprintf("spec.sharedCounters[%d].name", i), "counter set %q is also defined in slice %s; the allocator rejects the whole pool", cs.Name, prev.s.Name)
				}
				continue
			}
			sets[cs.Name] = setDef{s, i, cs}
		}
	}
	devices := map[string]sliceDevice{}
	var consumers []sliceDevice
	for _, s := range slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			sd := sliceDevice{s, i, d}
			if prev, dup := devices[d.Name]; dup {
				if prev.s != s {
					v.errorf(s, d.Name, sd.field()+".name", "device name %q is also used in slice %s; the allocator rejects the whole pool", d.Name, prev.s.Name)
				}
			} else {
				devices[d.Name] = sd
			}
			if len(d.ConsumesCounters) > 0 {
				consumers = append(consumers, sd)
			}
			for j, cc := range d.ConsumesCounters {
				cf := fmt.Sprintf("%s.consumesCounters[%d]", sd.field(), j)
				def, ok := sets[cc.CounterSet]
				if !ok {
					v.errorf(s, d.Name, cf+".counterSet", "counter set %q does not exist in pool %s/%s; the allocator rejects the whole pool", cc.CounterSet, k.Driver, k.Pool)
					continue
				}
				for _, c := range sortedKeys(cc.Counters) {
					capacity, ok := def.cs.Counters[c]
					if !ok {
						v.errorf(s, d.Name, cf+".counters["+c+"]", "counter %q does not exist in counter set %q (slice %s); the allocator rejects the whole pool", c, cc.CounterSet, def.s.Name)
						continue
					}
					if need := cc.Counters[c].Value; need.Cmp(capacity.Value) > 0 {
						v.errorf(s, d.Name, cf+".counters["+c+"]", "consumes %s of counter %q, but counter set %q only has %s: the device can never be allocated",
							need.String(), c, cc.CounterSet, capacity.Value.String())
					}
				}
			}
		}
	}
	return v.overlaps(ctx, k, consumers, nodes)
}

// nodeIndex resolves which nodes a device is reachable from, for the
// overlap check.
type nodeIndex struct {
	nodes []*corev1.Node
}

func (v *validator) nodeNames() nodeIndex { return nodeIndex{v.objs.Nodes} }

// reach returns the device's node names (sorted), or ok=false when they
// cannot be known: allNodes, or a selector while no Node objects are given
// and the selector does not list host names.
func (n nodeIndex) reach(sd sliceDevice) (names []string, ok bool) {
	spec := &sd.s.Spec
	nodeName, sel, all := spec.NodeName, spec.NodeSelector, spec.AllNodes != nil && *spec.AllNodes
	if spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection {
		nodeName, sel, all = sd.dev.NodeName, sd.dev.NodeSelector, sd.dev.AllNodes != nil && *sd.dev.AllNodes
	}
	switch {
	case nodeName != nil && *nodeName != "":
		return []string{*nodeName}, true
	case all || sel == nil:
		return nil, false
	}
	if len(n.nodes) > 0 {
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return nil, false
		}
		for _, node := range n.nodes {
			if ns.Match(node) {
				names = append(names, node.Name)
			}
		}
		sort.Strings(names)
		return names, true
	}
	// No Node objects: a one-term selector on host names or metadata.name.
	if len(sel.NodeSelectorTerms) != 1 {
		return nil, false
	}
	t := sel.NodeSelectorTerms[0]
	for _, e := range t.MatchExpressions {
		if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
			names = append(names, e.Values...)
		}
	}
	for _, e := range t.MatchFields {
		if e.Key == "metadata.name" && e.Operator == corev1.NodeSelectorOpIn {
			names = append(names, e.Values...)
		}
	}
	if countOther(t) > 0 || len(names) == 0 {
		return nil, false
	}
	sort.Strings(names)
	return names, true
}

// countOther counts selector requirements that are not host-name lists.
func countOther(t corev1.NodeSelectorTerm) int {
	n := 0
	for _, e := range t.MatchExpressions {
		if e.Key != corev1.LabelHostname || e.Operator != corev1.NodeSelectorOpIn {
			n++
		}
	}
	for _, e := range t.MatchFields {
		if e.Key != "metadata.name" || e.Operator != corev1.NodeSelectorOpIn {
			n++
		}
	}
	return n
}

// overlaps reports multi-host partitions that share a node but no counter:
// the allocator could hand out both at once although they use the same
// hosts. Devices consuming counters stand for partitions of the pool's
// hardware; a device reachable from several nodes (a multi-host slice, like
// a 2x4 TPU slice) overlaps every other consuming device on one of those
// nodes, and the two must draw from a common counter (same counter set and
// counter, both amounts positive) so that only one can be allocated.
func (v *validator) overlaps(ctx context.Context, k poolKey, consumers []sliceDevice, nodes nodeIndex) error {
	type part struct {
		sd       sliceDevice
		nodes    []string
		counters map[[2]string]bool
	}
	var parts []part
	for _, sd := range consumers {
		ns, ok := nodes.reach(sd)
		if !ok || len(ns) == 0 {
			continue
		}
		cs := map[[2]string]bool{}
		for _, cc := range sd.dev.ConsumesCounters {
			for c, q := range cc.Counters {
				if q.Value.Sign() > 0 {
					cs[[2]string{cc.CounterSet, c}] = true
				}
			}
		}
		parts = append(parts, part{sd, ns, cs})
	}
	found := 0
	for i := range parts {
		if i%256 == 0 && ctx.Err() != nil {
			return validationStopped(ctx)
		}
		a := &parts[i]
		for j := i + 1; j < len(parts); j++ {
			b := &parts[j]
			if len(a.nodes) < 2 && len(b.nodes) < 2 {
				continue
			}
			common := commonNode(a.nodes, b.nodes)
			if common == "" || shareCounter(a.counters, b.counters) {
				continue
			}
			found++
			if found > maxOverlapFindings {
				continue
			}
			v.errorf(b.sd.s, b.sd.dev.Name, b.sd.field()+".consumesCounters",
				"overlaps device %s (slice %s) on node %s, but the two share no counter, so both can be allocated at once; give them a common counter (e.g. one per node)",
				a.sd.dev.Name, a.sd.s.Name, common)
		}
	}
	if found > maxOverlapFindings {
		v.out = append(v.out, Finding{Severity: SeverityError, Pool: k.Driver + "/" + k.Pool,
			Message: fmt.Sprintf("%d more overlapping device pairs without a shared counter", found-maxOverlapFindings)})
	}
	return nil
}

func commonNode(a, b []string) string {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			return a[i]
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return ""
}

func shareCounter(a, b map[[2]string]bool) bool {
	if len(b) < len(a) {
		a, b = b, a
	}
	for c := range a {
		if b[c] {
			return true
		}
	}
	return false
}

// validationStopped is the error of a validation that ctx ended. Every
// package reports a stop the same way: what stopped, wrapping
// context.Cause (errors.Is finds context.Canceled or DeadlineExceeded).
func validationStopped(ctx context.Context) error {
	return fmt.Errorf("validating stopped: %w", context.Cause(ctx))
}
