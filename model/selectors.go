package model

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// celEnv compiles and evaluates device selectors with the scheduler's own CEL
// package, caching results per (expression, device): many claims share
// selectors, and a device's answer never changes within a run. Devices that
// look alike to an expression share one evaluation (celproject.go).
type celEnv struct {
	ctx      context.Context // ends evaluation early: a timeout or Ctrl-C
	cache    *dracel.Cache
	compiled map[string]error  // compile and cost check, per expression
	estimate map[string]uint64 // estimated worst-case cost of one evaluation
	exprs    map[string]*celExpr
	devices  []*celDevice // by device index, built when first needed
	// byMaps shares one celDevice among devices of one driver that hold
	// the same attribute and capacity maps (slices read from files share
	// identical maps, input/intern.go).
	byMaps map[celMaps]*celDevice
	keyBuf []byte
	evals  int // DeviceMatches calls, for tests
	// spent is the actual cost of every evaluation of the build so far,
	// budget what they may cost together (Options.CELCost): the run-wide
	// budget every selector draws from.
	spent, budget uint64
	// derivedMemo caches derivedAttributes results per expression and device.
	derivedMemo map[derivedKey]derivedResult
	// memo carries answers between builds (Options.Memo), nil without;
	// memoDevs is its record of each device, by index, once looked up.
	memo     *Memo
	memoDevs []*memoDevice
}

// celExpr is what celEnv remembers of one expression.
type celExpr struct {
	results   []celResult // by device index
	cost      uint64      // actual CEL cost of its evaluations so far
	tooCostly error       // set once it may not be evaluated any more (budgetError)
	celProjection
}

type celResult uint8

const (
	celUnknown celResult = iota
	celTrue
	celFalse
	celError
)

// answered is the result of an evaluation that gave ok.
func answered(ok bool) celResult {
	if ok {
		return celTrue
	}
	return celFalse
}

// overBudget is the error of a selector whose evaluations in one build
// cost more than selectorCostPerRun.
func overBudget(expr string) *BudgetError {
	return &BudgetError{Expr: expr, Why: fmt.Sprintf("its evaluations on the devices cost more than %d in all (drasat's limit per selector and run, 20 evaluations at the scheduler's limit per evaluation)", selectorCostPerRun)}
}

var celFeatures = dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}

func newCELEnv(ctx context.Context, budget uint64) *celEnv {
	if budget == 0 {
		budget = DefaultCELCost
	}
	return &celEnv{
		ctx:      ctx,
		cache:    dracel.NewCache(1000, celFeatures),
		compiled: map[string]error{},
		estimate: map[string]uint64{},
		exprs:    map[string]*celExpr{},
		budget:   budget,
	}
}

// compile reports a compile error for expr, or that the API server would
// refuse it as too long or too expensive: its estimated worst-case cost
// exceeds resourceapi.CELSelectorExpressionMaxCost, the limit the API
// server checks when a selector is written (the same check as its
// validateCELExpression). Each evaluation is also stopped past that cost
// at run time, as in the scheduler (dracel compiles every program with
// that limit), and when the build's context ends.
func (e *celEnv) compile(expr string) error {
	if err, ok := e.compiled[expr]; ok {
		return err
	}
	err := e.check(expr)
	e.compiled[expr] = err
	return err
}

func (e *celEnv) check(expr string) error {
	if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
		return fmt.Errorf("CEL expression of %d characters: longer than the API server's limit of %d", len(expr), resourceapi.CELSelectorExpressionMaxLength)
	}
	if res := e.cache.GetOrCompile(expr); res.Error != nil {
		return fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	envType := environment.NewExpressions
	res := dracel.GetCompiler(celFeatures).CompileCELExpression(expr, dracel.Options{EnvType: &envType})
	if res.Error != nil {
		return fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	e.estimate[expr] = res.MaxCost
	if res.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return fmt.Errorf("CEL expression %q: too complex: estimated cost %d exceeds the limit of %d (the API server refuses it)",
			expr, res.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
	}
	return nil
}

// matches evaluates expr for device d (cached). Compile errors must have
// been checked with compile.
func (e *celEnv) matches(expr string, d *Device, nDevices int) (bool, error) {
	x := e.expr(expr, nDevices)
	rs := x.results
	switch rs[d.Index] {
	case celTrue:
		return true, nil
	case celFalse:
		return false, nil
	}
	if e.memo != nil {
		return e.matchesMemo(x, expr, d, nDevices)
	}
	// A device that agrees with an evaluated one on everything expr reads
	// gets its answer.
	var key []byte
	share := x.ok && e.device(d, nDevices).shareable
	// The key depends on the CEL view of the device and on
	// allowMultipleAllocations only: devices sharing both share the
	// answer without building the key again.
	var dk celDeviceKey
	if share {
		dk = celDeviceKey{e.devices[d.Index], d.Spec.AllowMultipleAllocations != nil && *d.Spec.AllowMultipleAllocations}
		if ok, found := x.byDevice[dk]; found {
			rs[d.Index] = answered(ok)
			return ok, nil
		}
		key = x.key(e.keyBuf[:0], d.ID.Driver, d.Spec, e.devices[d.Index])
		e.keyBuf = key
		if ok, found := x.byKey[string(key)]; found {
			x.byDevice[dk] = ok
			rs[d.Index] = answered(ok)
			return ok, nil
		}
	}
	if x.tooCostly == nil {
		x.tooCostly = e.refuse(expr)
	}
	if x.tooCostly != nil {
		return false, x.tooCostly
	}
	ok, cost, err := e.evalCost(expr, d.ID.Driver, d.Spec)
	x.cost += cost
	if err == nil && x.cost > selectorCostPerRun {
		x.tooCostly = overBudget(expr)
		return false, x.tooCostly
	}
	switch {
	case err != nil:
		// Not shared: the message names the device.
		rs[d.Index] = celError
		return false, err
	default:
		rs[d.Index] = answered(ok)
	}
	if share {
		x.byKey[string(key)] = ok
		x.byDevice[dk] = ok
	}
	return ok, nil
}

// memoDevice is the memo's record of d (e.memo set), asked of the memo
// once per build.
func (e *celEnv) memoDevice(d *Device, nDevices int) *memoDevice {
	if e.memoDevs == nil {
		e.memoDevs = make([]*memoDevice, nDevices)
	}
	md := e.memoDevs[d.Index]
	if md == nil {
		md = e.memo.device(d.Spec)
		e.memoDevs[d.Index] = md
	}
	return md
}

// attributeSet is d's value set of attribute name (attributeValues), from
// the memo when a build asked it of the same device before: the set is
// the device's, whoever asks, and a constraint looks it up on tens of
// thousands of candidates every pass. The set is shared: read only.
func (e *celEnv) attributeSet(d *Device, name string, nDevices int) *[]string {
	var md *memoDevice
	if e.memo != nil {
		md = e.memoDevice(d, nDevices)
		for _, a := range md.attrs {
			if a.name == name {
				return a.vals
			}
		}
	}
	vals := attributeValues(d.ID.Driver, d.Spec, name)
	if md != nil {
		md.attrs = append(md.attrs, memoAttr{name, &vals})
	}
	return &vals
}

// matchesMemo is matches with the answers of earlier builds (Memo):
// the same sharing, order and cost accounting as matches, which builds the
// device's CEL view and key and evaluates where the memo does not know them.
func (e *celEnv) matchesMemo(x *celExpr, expr string, d *Device, nDevices int) (bool, error) {
	rs := x.results
	md := e.memoDevice(d, nDevices)
	me := md.entry(e.memo.gen, expr)
	if !me.keyed {
		me.share = x.ok && e.device(d, nDevices).shareable
		if me.share {
			e.keyBuf = x.key(e.keyBuf[:0], d.ID.Driver, d.Spec, e.devices[d.Index])
			me.key = e.memo.intern(e.keyBuf)
		}
		me.keyed = true
	}
	if me.share {
		if ok, found := x.byKey[me.key]; found {
			rs[d.Index] = answered(ok)
			return ok, nil
		}
	}
	if x.tooCostly == nil {
		x.tooCostly = e.refuse(expr)
	}
	if x.tooCostly != nil {
		return false, x.tooCostly
	}
	var ok bool
	var cost uint64
	if me.evaluated {
		ok, cost = me.ok, me.cost
		e.spent += cost
		e.memo.Reused++
	} else {
		var err error
		ok, cost, err = e.evalCost(expr, d.ID.Driver, d.Spec)
		e.memo.Evaluations++
		x.cost += cost
		if err != nil {
			rs[d.Index] = celError // not kept: evaluated again
			return false, err
		}
		x.cost -= cost // counted once below, as for a reused answer
		me.evaluated, me.ok, me.cost = true, ok, cost
	}
	x.cost += cost
	if x.cost > selectorCostPerRun {
		x.tooCostly = overBudget(expr)
		return false, x.tooCostly
	}
	rs[d.Index] = answered(ok)
	if me.share {
		x.byKey[me.key] = ok
	}
	return ok, nil
}

// expr returns expr's memo; the first call parses it for its paths.
func (e *celEnv) expr(expr string, nDevices int) *celExpr {
	x := e.exprs[expr]
	if x == nil {
		x = &celExpr{results: make([]celResult, nDevices)}
		x.byKey, x.byDevice = map[string]bool{}, map[celDeviceKey]bool{}
		if res := e.cache.GetOrCompile(expr); res.Error == nil {
			x.paths, x.ok = celPaths(res.Environment, expr)
		}
		e.exprs[expr] = x
	}
	return x
}

// device returns d as CEL sees it, built once per run.
func (e *celEnv) device(d *Device, nDevices int) *celDevice {
	if e.devices == nil {
		e.devices = make([]*celDevice, nDevices)
	}
	if e.devices[d.Index] == nil {
		k := celMaps{d.ID.Driver, reflect.ValueOf(d.Spec.Attributes).Pointer(), reflect.ValueOf(d.Spec.Capacity).Pointer()}
		c := e.byMaps[k]
		if c == nil {
			c = newCELDevice(d.ID.Driver, d.Spec)
			if e.byMaps == nil {
				e.byMaps = map[celMaps]*celDevice{}
			}
			e.byMaps[k] = c
		}
		e.devices[d.Index] = c
	}
	return e.devices[d.Index]
}

// celMaps identifies what newCELDevice reads: the driver and the maps.
type celMaps struct {
	driver      string
	attrs, caps uintptr
}

// refuse tells why expr may not be evaluated any more in this build, or
// nil: the build's time is up (its context's deadline: --timeout, the
// controller's batch budget), or the build's CEL budget is spent and expr
// is not a cheap selector. Cheap selectors (an estimated worst-case cost
// per evaluation of at most CheapSelectorCost) go on after the budget is
// spent, so that the expensive selectors of a batch cannot starve the
// ordinary ones; only the deadline stops them. The answer is sticky per
// selector: a selector is evaluated on every device or its requests are
// not allocated at all.
func (e *celEnv) refuse(expr string) error {
	if errors.Is(e.ctx.Err(), context.DeadlineExceeded) {
		return &BudgetError{Expr: expr, Why: "the run's time budget (--timeout) ran out before it was evaluated on every device", OfTheRun: true}
	}
	if e.spent >= e.budget && e.estimate[expr] > CheapSelectorCost {
		return &BudgetError{Expr: expr, Why: fmt.Sprintf("the run's CEL budget (cost %d for all selectors together) was spent before it was evaluated on every device", e.budget), OfTheRun: true}
	}
	return nil
}

// BudgetError says that a CEL selector was not evaluated within the
// build's budget (time or cost): the requests using it are not allocated,
// never allocated on a partial evaluation.
type BudgetError struct {
	Expr, Why string
	// OfTheRun: the run's budget ran out (its time, or the CEL cost all
	// selectors of the run share), not the selector's own limit. Another
	// run, with more time or other claims, may evaluate it: the
	// controller tries such a claim again instead of parking it.
	OfTheRun bool
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("CEL expression %q: not evaluated: %s; requests using it are not allocated", e.Expr, e.Why)
}

// DefaultCELCost is the CEL cost all selector evaluations of one build may
// spend together (Options.CELCost): 20 evaluations at the scheduler's
// limit per evaluation, about 2 s by the API's own estimate of 0.1 s per
// limit (the same as one selector's own limit, MaxSelectorCostPerRun).
// Ordinary selectors cost a few units per distinct device: the whole build
// of the mig bench's 16x8:1000 or 64x8:4000 instance costs 263.
const DefaultCELCost = 20 * resourceapi.CELSelectorExpressionMaxCost

// CheapSelectorCost is the estimated worst-case cost per evaluation up to
// which a selector is cheap: it is still evaluated when the build's CEL
// budget is spent (a thousandth of the scheduler's limit; comparisons of
// attributes cost a few units).
const CheapSelectorCost = resourceapi.CELSelectorExpressionMaxCost / 1000

// MaxSelectorCostPerRun bounds what one selector may cost over all the
// devices it is evaluated on in one run: 20 evaluations at the scheduler's
// limit per evaluation (about 2 s by the API's own estimate of 0.1 s per
// limit). Past it, the requests using the selector are unallocatable with
// that reason, and the other claims of the run go on: one expensive
// selector cannot stall the run or the controller. CEL costs are
// deterministic, so the same input gives the same answer.
const MaxSelectorCostPerRun = 20 * resourceapi.CELSelectorExpressionMaxCost

// selectorCostPerRun is MaxSelectorCostPerRun; tests lower it.
var selectorCostPerRun uint64 = MaxSelectorCostPerRun

func (e *celEnv) eval(expr, driver string, dev *resourceapi.Device) (bool, error) {
	ok, _, err := e.evalCost(expr, driver, dev)
	return ok, err
}

// evalCost evaluates expr on one device and returns its actual CEL cost.
func (e *celEnv) evalCost(expr, driver string, dev *resourceapi.Device) (bool, uint64, error) {
	res := e.cache.GetOrCompile(expr)
	if res.Error != nil {
		return false, 0, fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	if err := e.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return false, 0, &BudgetError{Expr: expr, Why: "the run's time budget (--timeout) ran out before it was evaluated", OfTheRun: true}
		}
		return false, 0, context.Cause(e.ctx)
	}
	e.evals++
	ok, details, err := res.DeviceMatches(e.ctx, dracel.Device{
		Driver:                   driver,
		AllowMultipleAllocations: dev.AllowMultipleAllocations,
		Attributes:               dev.Attributes,
		Capacity:                 dev.Capacity,
	})
	var cost uint64
	if details != nil && details.ActualCost() != nil {
		cost = *details.ActualCost()
	}
	e.spent += cost
	if err != nil && errors.Is(e.ctx.Err(), context.DeadlineExceeded) {
		// Stopped by the deadline, not an answer about the device.
		return false, cost, &BudgetError{Expr: expr, Why: "the run's time budget (--timeout) ran out while it was evaluated", OfTheRun: true}
	}
	if err != nil {
		return false, cost, fmt.Errorf("CEL expression %q on device %s: %w", expr, dev.Name, dracel.EnhanceRuntimeError(err))
	}
	return ok, cost, nil
}

// compileDerived reports a compile error of a derivedAttributes expression.
func (e *celEnv) compileDerived(expr string) error {
	res := e.cache.GetOrCompileDerivedAttribute(expr)
	if res.Error != nil {
		return fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	return nil
}

// derived evaluates a derivedAttributes expression on d (cached per
// expression and device) and returns its value set as attributeValues does.
func (e *celEnv) derived(expr string, d *Device) ([]string, error) {
	if e.derivedMemo == nil {
		e.derivedMemo = map[derivedKey]derivedResult{}
	}
	key := derivedKey{expr, d.Index}
	if r, ok := e.derivedMemo[key]; ok {
		return r.vals, r.err
	}
	res := e.cache.GetOrCompileDerivedAttribute(expr)
	if res.Error != nil {
		return nil, fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	if errors.Is(e.ctx.Err(), context.DeadlineExceeded) {
		return nil, &BudgetError{Expr: expr, Why: "the run's time budget (--timeout) ran out before it was evaluated", OfTheRun: true}
	}
	attr, details, err := res.EvaluateDerivedAttribute(e.ctx, dracel.Device{
		Driver:                   d.ID.Driver,
		AllowMultipleAllocations: d.Spec.AllowMultipleAllocations,
		Attributes:               d.Spec.Attributes,
		Capacity:                 d.Spec.Capacity,
	})
	if details != nil && details.ActualCost() != nil {
		e.spent += *details.ActualCost()
	}
	if err != nil && errors.Is(e.ctx.Err(), context.DeadlineExceeded) {
		return nil, &BudgetError{Expr: expr, Why: "the run's time budget (--timeout) ran out while it was evaluated", OfTheRun: true}
	}
	var r derivedResult
	if err != nil {
		r.err = fmt.Errorf("CEL expression %q on device %s: %w", expr, d.ID, dracel.EnhanceRuntimeError(err))
	} else if attr != nil {
		r.vals = valueSet(*attr)
	}
	e.derivedMemo[key] = r
	return r.vals, r.err
}

type derivedKey struct {
	expr string
	dev  int
}

type derivedResult struct {
	vals []string
	err  error
}

// attributeValues looks an attribute up as the allocator does: the fully
// qualified name first, then the bare id when the domain is the driver's.
// It returns the value set in canonical strings ("s:x", "i:3", "b:true",
// "v:1.0.0"), sorted and unique: one for a scalar, the elements of a
// list-type attribute (ints, bools, strings, versions) otherwise. Nil when
// the attribute is missing, is an empty list or of no known type (such a
// device cannot take part in a constraint, as upstream's attributeAsSet).
func attributeValues(driver string, dev *resourceapi.Device, name string) []string {
	attr, ok := dev.Attributes[resourceapi.QualifiedName(name)]
	if !ok {
		i := strings.Index(name, "/")
		if i < 0 || name[:i] != driver {
			return nil
		}
		attr, ok = dev.Attributes[resourceapi.QualifiedName(name[i+1:])]
		if !ok {
			return nil
		}
	}
	return valueSet(attr)
}

// valueSet is an attribute's values in canonical strings, sorted and unique
// (see attributeValues); nil for an empty list or an unknown type.
func valueSet(attr resourceapi.DeviceAttribute) []string {
	var out []string
	// Upstream looks at the list fields first, then the scalars.
	switch {
	case len(attr.IntValues) > 0:
		for _, v := range attr.IntValues {
			out = append(out, fmt.Sprintf("i:%d", v))
		}
	case len(attr.BoolValues) > 0:
		for _, v := range attr.BoolValues {
			out = append(out, fmt.Sprintf("b:%t", v))
		}
	case len(attr.StringValues) > 0:
		for _, v := range attr.StringValues {
			out = append(out, "s:"+v)
		}
	case len(attr.VersionValues) > 0:
		for _, v := range attr.VersionValues {
			out = append(out, "v:"+v)
		}
	case attr.IntValue != nil:
		out = []string{fmt.Sprintf("i:%d", *attr.IntValue)}
	case attr.BoolValue != nil:
		out = []string{fmt.Sprintf("b:%t", *attr.BoolValue)}
	case attr.StringValue != nil:
		out = []string{"s:" + *attr.StringValue}
	case attr.VersionValue != nil:
		out = []string{"v:" + *attr.VersionValue}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
