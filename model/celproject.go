package model

// Memoising CEL selectors by projection.
//
// A selector usually reads a few values of the device (its driver, one or
// two attributes) while devices differ in many others (uuid, index...). Two
// devices that agree on every value an expression reads evaluate it
// identically, so matches evaluates once per distinct projection and shares
// the answer. The projection mirrors how dracel.CompilationResult.DeviceMatches
// builds the `device` variable (k8s.io/dynamic-resource-allocation/cel,
// compile.go): attributes and capacities grouped by domain, unqualified names
// in the driver's domain, a missing domain read as an empty map.
//
// An expression is projectable only when every use of `device` is one of
//
//	device.driver, device.allowMultipleAllocations,
//	device.attributes[<string literal>].<id>, device.attributes[<lit>][<lit>],
//	device.capacity[<lit>].<id>, device.capacity[<lit>][<lit>]
//
// (has() of them included). Anything else (a whole map, a computed key,
// cel.bind of a domain map, a comprehension variable named device...) falls
// back to evaluating per device. Only true/false are shared: an error is
// re-evaluated on its own device, so its message names that device.

import (
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/drasat/drasat/input"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	resourceapi "k8s.io/api/resource/v1"
)

// celPath is one value an expression reads: field is "driver",
// "allowMultipleAllocations", "attributes" or "capacity"; the last two with
// the domain and id looked up.
type celPath struct {
	field, domain, id string
}

// celProjection is how an expression's answers are shared.
type celProjection struct {
	ok    bool      // projectable
	paths []celPath // distinct, in order of appearance
	// byKey holds the shared answers, by the device's key (see key).
	byKey map[string]bool
	// byDevice holds the same answers by the device's CEL view (shared
	// among devices with identical maps) and allowMultipleAllocations.
	byDevice map[celDeviceKey]bool
}

// celPaths parses expr in env and returns the device values it reads; ok is
// false when it uses device in any other way.
func celPaths(env *cel.Env, expr string) (paths []celPath, ok bool) {
	parsed, iss := env.Parse(expr)
	if iss != nil && iss.Err() != nil {
		return nil, false
	}
	root := parsed.NativeRep().Expr()
	// Every occurrence of the identifier device must be the root of a
	// recognised path: collect the paths, remember their roots, then look for
	// a device identifier that is no path's root.
	roots := map[int64]bool{}
	seen := map[celPath]bool{}
	var idents []int64
	ast.PreOrderVisit(root, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.IdentKind && isDeviceIdent(e) {
			idents = append(idents, e.ID())
		}
		p, rootID, match := matchPath(e)
		if !match {
			return
		}
		roots[rootID] = true
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}))
	for _, id := range idents {
		if !roots[id] {
			return nil, false
		}
	}
	return paths, true
}

// isDeviceIdent: `device`, or `.device` (the leading dot only says "root
// scope").
func isDeviceIdent(e ast.Expr) bool {
	return e.Kind() == ast.IdentKind && strings.TrimPrefix(e.AsIdent(), ".") == "device"
}

// matchPath recognises a complete path at e and returns it with the id of
// its device identifier.
func matchPath(e ast.Expr) (celPath, int64, bool) {
	var operand ast.Expr
	var id string
	switch e.Kind() {
	case ast.SelectKind: // X.id, or has(X.id)
		s := e.AsSelect()
		operand, id = s.Operand(), s.FieldName()
		if isDeviceIdent(operand) && (id == "driver" || id == "allowMultipleAllocations") {
			return celPath{field: id}, operand.ID(), true
		}
	case ast.CallKind: // X['id']
		var ok bool
		operand, id, ok = indexByLiteral(e)
		if !ok {
			return celPath{}, 0, false
		}
	default:
		return celPath{}, 0, false
	}
	// X must be device.attributes['domain'] or device.capacity['domain'].
	m, domain, ok := indexByLiteral(operand)
	if !ok || m.Kind() != ast.SelectKind {
		return celPath{}, 0, false
	}
	s := m.AsSelect()
	field := s.FieldName()
	if s.IsTestOnly() || !isDeviceIdent(s.Operand()) || (field != "attributes" && field != "capacity") {
		return celPath{}, 0, false
	}
	return celPath{field: field, domain: domain, id: id}, s.Operand().ID(), true
}

// indexByLiteral matches X[<string literal>].
func indexByLiteral(e ast.Expr) (ast.Expr, string, bool) {
	if e.Kind() != ast.CallKind {
		return nil, "", false
	}
	c := e.AsCall()
	if c.FunctionName() != operators.Index || c.IsMemberFunction() || len(c.Args()) != 2 {
		return nil, "", false
	}
	key := c.Args()[1]
	if key.Kind() != ast.LiteralKind {
		return nil, "", false
	}
	s, ok := key.AsLiteral().(types.String)
	if !ok {
		return nil, "", false
	}
	return c.Args()[0], string(s), true
}

// celDevice is a device's attributes and capacities as the CEL environment
// shows them (domain -> id -> value), each value encoded as a string that
// determines it exactly.
type celDevice struct {
	// shareable is false when DeviceMatches would fail on the device
	// whatever the expression (an attribute without a usable value) or when
	// two names land on the same domain and id (which one CEL sees depends
	// on map order). Such a device is always evaluated on its own.
	shareable   bool
	attrs, caps map[string]map[string]string
}

type celDeviceKey struct {
	c     *celDevice
	multi bool
}

func newCELDevice(driver string, dev *resourceapi.Device) *celDevice {
	c := &celDevice{shareable: true, attrs: map[string]map[string]string{}, caps: map[string]map[string]string{}}
	put := func(m map[string]map[string]string, name resourceapi.QualifiedName, v string) {
		domain, id := celQualifiedName(name, driver)
		if m[domain] == nil {
			m[domain] = map[string]string{}
		}
		if _, dup := m[domain][id]; dup {
			c.shareable = false
		}
		m[domain][id] = v
	}
	for name, a := range dev.Attributes {
		v, ok := encodeCELAttribute(a)
		if !ok {
			c.shareable = false
		}
		put(c.attrs, name, v)
	}
	for name, q := range dev.Capacity {
		put(c.caps, name, input.QuantityKey(q.Value))
	}
	return c
}

// celQualifiedName is dracel's parseQualifiedName: the domain is what comes
// before the first "/", the driver when there is none.
func celQualifiedName(name resourceapi.QualifiedName, driver string) (string, string) {
	if i := strings.Index(string(name), "/"); i >= 0 {
		return string(name[:i]), string(name[i+1:])
	}
	return driver, string(name)
}

// encodeCELAttribute encodes the value dracel's getAttributeValue gives CEL:
// the same precedence among the fields, the same failures (ok false). Type
// tags keep 1, "1" and true apart; strings are length-prefixed. Versions
// keep their text: equal text is an equal semver (distinct texts of one
// version only split a group, which is harmless).
func encodeCELAttribute(a resourceapi.DeviceAttribute) (string, bool) {
	var b strings.Builder
	switch {
	case a.IntValues != nil:
		b.WriteString("I")
		for _, v := range a.IntValues {
			b.WriteString(strconv.FormatInt(v, 10) + ",")
		}
	case a.BoolValues != nil:
		b.WriteString("B")
		for _, v := range a.BoolValues {
			b.WriteString(strconv.FormatBool(v) + ",")
		}
	case a.StringValues != nil:
		b.WriteString("S")
		for _, v := range a.StringValues {
			writeLenString(&b, v)
		}
	case a.VersionValues != nil:
		b.WriteString("V")
		for _, v := range a.VersionValues {
			if _, err := semver.Parse(v); err != nil {
				return "", false
			}
			writeLenString(&b, v)
		}
	case a.IntValue != nil:
		b.WriteString("i" + strconv.FormatInt(*a.IntValue, 10))
	case a.BoolValue != nil:
		b.WriteString("b" + strconv.FormatBool(*a.BoolValue))
	case a.StringValue != nil:
		b.WriteString("s" + *a.StringValue)
	case a.VersionValue != nil:
		if _, err := semver.Parse(*a.VersionValue); err != nil {
			return "", false
		}
		b.WriteString("v" + *a.VersionValue)
	default:
		return "", false
	}
	return b.String(), true
}

func writeLenString(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// key appends to buf the projection of the device onto p's paths: per path,
// "-" for a missing domain, "0" for a missing id, else "1" and the
// length-prefixed value. Devices with equal keys evaluate p's expression
// identically.
func (p *celProjection) key(buf []byte, driver string, dev *resourceapi.Device, c *celDevice) []byte {
	for _, path := range p.paths {
		switch path.field {
		case "driver":
			buf = appendLenString(buf, driver)
		case "allowMultipleAllocations":
			buf = strconv.AppendBool(buf, dev.AllowMultipleAllocations != nil && *dev.AllowMultipleAllocations)
			buf = append(buf, ';')
		default:
			m := c.attrs
			if path.field == "capacity" {
				m = c.caps
			}
			ids, ok := m[path.domain]
			if !ok {
				buf = append(buf, '-')
				continue
			}
			v, ok := ids[path.id]
			if !ok {
				buf = append(buf, '0')
				continue
			}
			buf = append(buf, '1')
			buf = appendLenString(buf, v)
		}
	}
	return buf
}

func appendLenString(buf []byte, s string) []byte {
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, ':')
	return append(buf, s...)
}
