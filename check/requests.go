package check

import (
	"context"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// alt is the request or subrequest a group of results was allocated for.
type alt struct {
	name        string // as in results: "req" or "req/sub"
	class       string
	selectors   []resourceapi.DeviceSelector
	mode        resourceapi.DeviceAllocationMode
	count       int64
	admin       bool
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
	placements  []*placement
}

func exactAlt(r *resourceapi.DeviceRequest) *alt {
	e := r.Exactly
	return &alt{name: r.Name, class: e.DeviceClassName, selectors: e.Selectors, mode: e.AllocationMode,
		count: e.Count, admin: ptrTrue(e.AdminAccess), tolerations: e.Tolerations, capacity: e.Capacity}
}

func subAlt(r *resourceapi.DeviceRequest, s *resourceapi.DeviceSubRequest) *alt {
	return &alt{name: r.Name + "/" + s.Name, class: s.DeviceClassName, selectors: s.Selectors, mode: s.AllocationMode,
		count: s.Count, tolerations: s.Tolerations, capacity: s.Capacity}
}

// alts groups a new claim's results by the request (or subrequest) they
// name and checks rule 3's naming part: every result names a request of the
// claim (a subrequest "req/sub" for firstAvailable, the bare name
// otherwise), every request has results, and a firstAvailable request uses
// exactly one subrequest.
func (c *checker) alts(nc *newClaim) []*alt {
	byName := map[string]*alt{}
	var out []*alt
	reqs := nc.in.Spec.Devices.Requests
	used := make([]map[string]bool, len(reqs))
	for _, p := range nc.placements {
		name := p.res.Request
		parent, sub, hasSub := strings.Cut(name, "/")
		ri := -1
		for i := range reqs {
			if reqs[i].Name == parent {
				ri = i
				break
			}
		}
		if ri < 0 {
			c.errorf("claim %s: device %s: result names request %q, which the claim does not have", nc.key, keyOf(p.res), name)
			continue
		}
		r := &reqs[ri]
		a := byName[name]
		if a == nil {
			switch {
			case !hasSub && r.Exactly != nil:
				a = exactAlt(r)
			case !hasSub:
				c.errorf("claim %s: device %s: result names request %q, which is a firstAvailable request: the result must name one of its subrequests", nc.key, keyOf(p.res), name)
				continue
			case r.Exactly != nil || len(r.FirstAvailable) == 0:
				c.errorf("claim %s: device %s: result names subrequest %q, but request %s has no subrequests", nc.key, keyOf(p.res), name, parent)
				continue
			default:
				for i := range r.FirstAvailable {
					if r.FirstAvailable[i].Name == sub {
						a = subAlt(r, &r.FirstAvailable[i])
						break
					}
				}
				if a == nil {
					c.errorf("claim %s: device %s: result names subrequest %q, which request %s does not have", nc.key, keyOf(p.res), name, parent)
					continue
				}
			}
			byName[name] = a
			out = append(out, a)
		}
		a.placements = append(a.placements, p)
		if used[ri] == nil {
			used[ri] = map[string]bool{}
		}
		used[ri][name] = true
	}
	for i := range reqs {
		switch n := len(used[i]); {
		case n == 0:
			c.errorf("claim %s: request %s has no allocated device", nc.key, reqs[i].Name)
		case n > 1:
			c.errorf("claim %s: request %s: results use %d subrequests (%s), want exactly one", nc.key, reqs[i].Name, n, strings.Join(sortedKeys(used[i]), ", "))
		}
	}
	return out
}

// checkRequests: rule 3 except allocationMode All's completeness, which
// needs the node (see checkNode).
func (c *checker) checkRequests(nc *newClaim) {
	nc.alts = c.alts(nc)
	for _, a := range nc.alts {
		prefix := fmt.Sprintf("claim %s: request %s", nc.key, a.name)
		switch a.mode {
		case resourceapi.DeviceAllocationModeExactCount, "":
			want := a.count
			if want == 0 {
				want = 1
			}
			if int64(len(a.placements)) != want {
				c.errorf("%s: %d devices allocated, want exactly count %d", prefix, len(a.placements), want)
			}
		case resourceapi.DeviceAllocationModeAll:
			// At least one result exists, else there is no alt; the rest
			// is checked with the node.
		default:
			c.errorf("%s: unknown allocationMode %q", prefix, a.mode)
		}
		class := c.classes[a.class]
		if class == nil {
			c.errorf("%s: device class %q does not exist", prefix, a.class)
		}
		for _, p := range a.placements {
			k := keyOf(p.res)
			if got := ptrTrue(p.res.AdminAccess); got != a.admin {
				c.errorf("%s: device %s: result has adminAccess %t, the request asks for %t", prefix, k, got, a.admin)
			}
			if p.dev == nil {
				continue
			}
			if class != nil {
				if err := c.selectorsMatch(class.Spec.Selectors, p.dev); err != nil {
					c.errorf("%s: device %s: device class %s selector %w", prefix, k, class.Name, err)
				}
			}
			if err := c.selectorsMatch(a.selectors, p.dev); err != nil {
				c.errorf("%s: device %s: request selector %w", prefix, k, err)
			}
			if t := untoleratedTaint(p.dev.spec, a.tolerations); t != nil {
				c.errorf("%s: device %s: taint %s=%s:%s is not tolerated", prefix, k, t.Key, t.Value, t.Effect)
			}
		}
	}
}

// selectorsMatch returns an error describing the first selector the device
// fails (false, a CEL error, or an unsupported selector).
func (c *checker) selectorsMatch(sels []resourceapi.DeviceSelector, d *device) error {
	for i, s := range sels {
		if s.CEL == nil {
			return fmt.Errorf("#%d: not a CEL selector (unsupported)", i)
		}
		ok, err := c.w.eval(s.CEL.Expression, d)
		if err != nil {
			return fmt.Errorf("#%d: %w", i, err)
		}
		if !ok {
			return fmt.Errorf("#%d %q is false", i, s.CEL.Expression)
		}
	}
	return nil
}

// matchesAll tells whether the device satisfies class and request
// selectors (errors count as no match).
func (c *checker) matchesAll(class *resourceapi.DeviceClass, sels []resourceapi.DeviceSelector, d *device) bool {
	if class == nil {
		return false
	}
	return c.selectorsMatch(class.Spec.Selectors, d) == nil && c.selectorsMatch(sels, d) == nil
}

// untoleratedTaint returns a NoSchedule or NoExecute taint that no
// toleration tolerates.
func untoleratedTaint(d *resourceapi.Device, tols []resourceapi.DeviceToleration) *resourceapi.DeviceTaint {
	for i := range d.Taints {
		t := &d.Taints[i]
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if resourceclaim.ToleratesTaint(tol, *t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// checkConstraints: rule 4, matchAttribute and distinctAttribute over the
// claim's results of the named requests (all requests when none are named;
// a name may be a request or "req/sub").
func (c *checker) checkConstraints(nc *newClaim) {
	for i, con := range nc.in.Spec.Devices.Constraints {
		var kind string
		var attr resourceapi.FullyQualifiedName
		switch {
		case con.MatchAttribute != nil:
			kind, attr = "matchAttribute", *con.MatchAttribute
		case con.DistinctAttribute != nil:
			kind, attr = "distinctAttribute", *con.DistinctAttribute
		default:
			c.errorf("claim %s: constraint #%d: neither matchAttribute nor distinctAttribute (unsupported)", nc.key, i)
			continue
		}
		prefix := fmt.Sprintf("claim %s: constraint #%d %s %s", nc.key, i, kind, attr)
		type member struct {
			p   *placement
			val valueSet
		}
		var ms []member
		for _, p := range nc.placements {
			if p.dev == nil || !constraintApplies(con.Requests, p.res.Request) {
				continue
			}
			a := lookupAttribute(p.dev, attr)
			if expr, ok := derivedExpression(nc.in, p.res.Request, attr); ok {
				// derivedAttributes (alpha) shadow the device's own
				// attribute for the request that defines them.
				var err error
				if a, err = c.derivedAttribute(expr, p.dev); err != nil {
					c.errorf("%s: device %s: derived attribute: %v", prefix, keyOf(p.res), err)
					continue
				}
			}
			if a == nil {
				c.errorf("%s: device %s (request %s) does not have the attribute", prefix, keyOf(p.res), p.res.Request)
				continue
			}
			v := asSet(a)
			if v == nil {
				c.errorf("%s: device %s: attribute has no value", prefix, keyOf(p.res))
				continue
			}
			ms = append(ms, member{p, v})
		}
		if kind == "matchAttribute" {
			if len(ms) == 0 {
				continue
			}
			common := ms[0].val
			for _, m := range ms[1:] {
				common = common.intersect(m.val)
			}
			if len(common) == 0 {
				var parts []string
				for _, m := range ms {
					parts = append(parts, fmt.Sprintf("%s=%s", keyOf(m.p.res), m.val))
				}
				c.errorf("%s: devices have no common value: %s", prefix, strings.Join(parts, ", "))
			}
			continue
		}
		for a := range ms {
			for b := a + 1; b < len(ms); b++ {
				if common := ms[a].val.intersect(ms[b].val); len(common) > 0 {
					c.errorf("%s: devices %s and %s share value %s", prefix, keyOf(ms[a].p.res), keyOf(ms[b].p.res), common)
				}
			}
		}
	}
}

func constraintApplies(names []string, result string) bool {
	if len(names) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(result, "/")
	for _, n := range names {
		if n == result || n == parent {
			return true
		}
	}
	return false
}

// maxResults is the API's limit on a claim's results, all requests together.
const maxResults = resourceapi.AllocationResultsMaxSize

// checkResultFields: at most 32 results per claim, and the fields upstream's
// allocator copies into each result: the request's tolerations, the
// device's binding conditions and the slice's skipNodeOperations.
func (c *checker) checkResultFields(nc *newClaim) {
	if n := len(nc.alloc.Devices.Results); n > maxResults {
		c.errorf("claim %s: %d results, more than the limit of %d per claim", nc.key, n, maxResults)
	}
	for _, p := range nc.placements {
		if p.dev == nil {
			continue
		}
		prefix := fmt.Sprintf("claim %s: device %s (request %s)", nc.key, keyOf(p.res), p.res.Request)
		if want := requestTolerations(nc.in, p.res.Request); !apiequality.Semantic.DeepEqual(want, p.res.Tolerations) {
			c.errorf("%s: tolerations %v, want the request's %v", prefix, p.res.Tolerations, want)
		}
		if !apiequality.Semantic.DeepEqual(p.dev.spec.BindingConditions, p.res.BindingConditions) ||
			!apiequality.Semantic.DeepEqual(p.dev.spec.BindingFailureConditions, p.res.BindingFailureConditions) {
			c.errorf("%s: bindingConditions %v / bindingFailureConditions %v, want the device's %v / %v", prefix,
				p.res.BindingConditions, p.res.BindingFailureConditions, p.dev.spec.BindingConditions, p.dev.spec.BindingFailureConditions)
		}
		if !apiequality.Semantic.DeepEqual(p.dev.slice.Spec.SkipNodeOperations, p.res.SkipNodeOperations) {
			c.errorf("%s: skipNodeOperations %v, want the slice's %v", prefix, p.res.SkipNodeOperations, p.dev.slice.Spec.SkipNodeOperations)
		}
	}
}

// requestTolerations are the tolerations of the request or subrequest a
// result names.
func requestTolerations(claim *resourceapi.ResourceClaim, result string) []resourceapi.DeviceToleration {
	parent, sub, hasSub := strings.Cut(result, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != parent {
			continue
		}
		if !hasSub && r.Exactly != nil {
			return r.Exactly.Tolerations
		}
		for _, s := range r.FirstAvailable {
			if hasSub && s.Name == sub {
				return s.Tolerations
			}
		}
	}
	return nil
}

// derivedExpression finds the derivedAttributes entry of the request (or
// subrequest) a result names.
func derivedExpression(claim *resourceapi.ResourceClaim, result string, attr resourceapi.FullyQualifiedName) (string, bool) {
	parent, sub, hasSub := strings.Cut(result, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != parent {
			continue
		}
		var das []resourceapi.DeviceDerivedAttribute
		switch {
		case !hasSub && r.Exactly != nil:
			das = r.Exactly.DerivedAttributes
		case hasSub:
			for _, s := range r.FirstAvailable {
				if s.Name == sub {
					das = s.DerivedAttributes
				}
			}
		}
		for _, da := range das {
			if da.Name == attr {
				return da.Expression, true
			}
		}
	}
	return "", false
}

// derivedAttribute evaluates a derivedAttributes expression on a device
// with the scheduler's CEL package.
func (c *checker) derivedAttribute(expr string, d *device) (*resourceapi.DeviceAttribute, error) {
	res := c.w.cel.GetOrCompileDerivedAttribute(expr)
	if res.Error != nil {
		return nil, res.Error
	}
	a, _, err := res.EvaluateDerivedAttribute(context.Background(), dracel.Device{Driver: d.key.Driver,
		AllowMultipleAllocations: d.spec.AllowMultipleAllocations, Attributes: d.spec.Attributes, Capacity: d.spec.Capacity})
	return a, err
}

// lookupAttribute finds an attribute as the allocator does: the fully
// qualified name, or the bare id when the domain is the device's driver.
func lookupAttribute(d *device, name resourceapi.FullyQualifiedName) *resourceapi.DeviceAttribute {
	if a, ok := d.spec.Attributes[resourceapi.QualifiedName(name)]; ok {
		return &a
	}
	domain, id, ok := strings.Cut(string(name), "/")
	if !ok || domain != d.key.Driver {
		return nil
	}
	if a, ok := d.spec.Attributes[resourceapi.QualifiedName(id)]; ok {
		return &a
	}
	return nil
}

// valueSet is an attribute's values, each tagged with its type so that
// values of different types never compare equal. Scalars are one-element
// sets; list attributes compare by intersection as upstream's
// DRAListTypeAttributes does.
type valueSet map[string]bool

func (v valueSet) intersect(o valueSet) valueSet {
	out := valueSet{}
	for x := range v {
		if o[x] {
			out[x] = true
		}
	}
	return out
}

func (v valueSet) String() string {
	xs := make([]string, 0, len(v))
	for x := range v {
		xs = append(xs, x)
	}
	sort.Strings(xs)
	return "{" + strings.Join(xs, ",") + "}"
}

func asSet(a *resourceapi.DeviceAttribute) valueSet {
	v := valueSet{}
	switch {
	case len(a.IntValues) > 0:
		for _, x := range a.IntValues {
			v[fmt.Sprintf("int:%d", x)] = true
		}
	case len(a.BoolValues) > 0:
		for _, x := range a.BoolValues {
			v[fmt.Sprintf("bool:%t", x)] = true
		}
	case len(a.StringValues) > 0:
		for _, x := range a.StringValues {
			v["string:"+x] = true
		}
	case len(a.VersionValues) > 0:
		for _, x := range a.VersionValues {
			v["version:"+x] = true
		}
	case a.IntValue != nil:
		v[fmt.Sprintf("int:%d", *a.IntValue)] = true
	case a.BoolValue != nil:
		v[fmt.Sprintf("bool:%t", *a.BoolValue)] = true
	case a.StringValue != nil:
		v["string:"+*a.StringValue] = true
	case a.VersionValue != nil:
		v["version:"+*a.VersionValue] = true
	default:
		return nil
	}
	return v
}
