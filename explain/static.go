package explain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/drasat/drasat/model"
)

// selector is one CEL selector of a class or a request.
type selector struct {
	expr, where string
}

// celCache evaluates selectors on devices with the scheduler's CEL package.
type celCache struct {
	cache *dracel.Cache
}

func newCEL() *celCache {
	return &celCache{cache: dracel.NewCache(100, dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})}
}

// matches is true, false, or an error (compile or runtime). The
// evaluation stops when ctx ends (a timeout or Ctrl-C).
func (c *celCache) matches(ctx context.Context, expr string, d *model.Device) (bool, error) {
	res := c.cache.GetOrCompile(expr)
	if res.Error != nil {
		return false, fmt.Errorf("%s", res.Error.Detail)
	}
	ok, _, err := res.DeviceMatches(ctx, dracel.Device{
		Driver: d.ID.Driver, AllowMultipleAllocations: d.Spec.AllowMultipleAllocations,
		Attributes: d.Spec.Attributes, Capacity: d.Spec.Capacity,
	})
	return ok, err
}

// altSelectors returns the alternative's class and request selectors. The
// request's own selectors are found in the claim object.
func altSelectors(c *model.Claim, ri int, a *model.Alternative) []selector {
	var out []selector
	if a.Class != nil {
		for i, s := range a.Class.Spec.Selectors {
			if s.CEL != nil {
				out = append(out, selector{s.CEL.Expression, fmt.Sprintf("class %s selectors[%d]", a.Class.Name, i)})
			}
		}
	}
	req := c.Obj.Spec.Devices.Requests[ri]
	var sels []resourceapi.DeviceSelector
	if req.Exactly != nil {
		sels = req.Exactly.Selectors
	} else {
		for _, s := range req.FirstAvailable {
			if s.Name == a.SubName {
				sels = s.Selectors
			}
		}
	}
	for i, s := range sels {
		if s.CEL != nil {
			out = append(out, selector{s.CEL.Expression, fmt.Sprintf("selectors[%d]", i)})
		}
	}
	return out
}

// tolerations of the alternative's request or subrequest.
func altTolerations(c *model.Claim, ri int, a *model.Alternative) []resourceapi.DeviceToleration {
	req := c.Obj.Spec.Devices.Requests[ri]
	if req.Exactly != nil {
		return req.Exactly.Tolerations
	}
	for _, s := range req.FirstAvailable {
		if s.Name == a.SubName {
			return s.Tolerations
		}
	}
	return nil
}

// noMatch explains why alternative a of request ri has no candidate device:
// which selector the devices fail (the closest: the one most devices fail
// alone), or, among the matching devices, what excludes them. done is
// false when ctx ended before every device was looked at: the reason then
// only says so.
func (e *explainer) noMatch(ctx context.Context, c *model.Claim, ri int, a *model.Alternative) (r Reason, done bool) {
	r = Reason{Kind: KindNoMatch, Request: a.Name}
	sels := altSelectors(c, ri, a)
	nClass := 0 // devices matching the class selectors
	nClassSels := 0
	if a.Class != nil {
		for _, s := range a.Class.Spec.Selectors {
			if s.CEL != nil {
				nClassSels++
			}
		}
	}
	onlyFail := map[int]int{} // selector -> devices failing only it
	firstFail := map[int]int{}
	var matching []*model.Device
	var evalErr error
	for _, d := range e.p.Devices {
		if ctx.Err() != nil {
			why := "the time budget ran out"
			if errors.Is(ctx.Err(), context.Canceled) {
				why = "interrupted"
			}
			return Reason{Kind: KindUnknown, Request: a.Name, Message: fmt.Sprintf("request %s: no device can serve it; %s while its selectors were evaluated", a.Name, why)}, false
		}
		var failed []int
		for i, s := range sels {
			ok, err := e.cel.matches(ctx, s.expr, d)
			if err != nil {
				if evalErr == nil {
					evalErr = fmt.Errorf("%s `%s` on device %s: %v", s.where, s.expr, d.ID, err)
				}
				ok = false
			}
			if !ok {
				failed = append(failed, i)
			}
		}
		classOK := true
		for _, f := range failed {
			if f < nClassSels {
				classOK = false
			}
		}
		if classOK {
			nClass++
		}
		switch {
		case len(failed) == 0:
			matching = append(matching, d)
		case classOK || nClassSels == 0:
			firstFail[failed[0]]++
			if len(failed) == 1 {
				onlyFail[failed[0]]++
			}
		}
	}
	className := "?"
	if a.Class != nil {
		className = a.Class.Name
	}
	if len(matching) == 0 {
		closest, n := -1, 0
		for _, tally := range []map[int]int{onlyFail, firstFail} {
			for i, k := range tally {
				if k > n || (k == n && i < closest) {
					closest, n = i, k
				}
			}
			if closest >= 0 {
				break
			}
		}
		switch {
		case len(e.p.Devices) == 0:
			r.Message = fmt.Sprintf("request %s: no device is published in any usable pool", a.Name)
		case nClass == 0:
			r.Message = fmt.Sprintf("request %s: no device is of class %s (0 of %d devices match the class selectors)", a.Name, className, len(e.p.Devices))
			if closest >= 0 {
				r.Message += fmt.Sprintf("; the closest fail on %s `%s`", sels[closest].where, sels[closest].expr)
			}
		default:
			r.Message = fmt.Sprintf("request %s: no device of class %s matches the request's selectors (0 of %d devices of the class)", a.Name, className, nClass)
			if closest >= 0 {
				r.Message += fmt.Sprintf("; the closest fail on `%s` (%d fail only on it)", sels[closest].expr, onlyFail[closest])
				r.Selector = sels[closest].expr
			}
		}
		if evalErr != nil {
			r.Message += "; evaluation error: " + evalErr.Error()
		}
		if len(e.p.Issues) > 0 {
			r.Message += fmt.Sprintf("; note: %d pools are not used (%s)", len(e.p.Issues), e.p.Issues[0])
		}
		return r, true
	}
	// Devices match, but none can be used.
	tols := altTolerations(c, ri, a)
	var tainted, noCapacity, inUse, tooBig, noNode []string
	holders := map[string]bool{}
	for _, d := range matching {
		_, capacityOK, _ := model.ConsumedCapacity(a.CapacityRequests, d.Spec.Capacity)
		switch {
		case !capacityOK:
			noCapacity = append(noCapacity, d.ID.Device)
		case model.TaintPrevents(d.Spec, tols):
			tainted = append(tainted, d.ID.Device)
		case !model.FitsAlone(e.p, d):
			tooBig = append(tooBig, d.ID.Device)
			for _, cons := range d.Consumes {
				for _, h := range e.bakedOfSet(cons.Set) {
					holders[h] = true
				}
			}
		case d.InUse && !a.AdminAccess:
			inUse = append(inUse, d.ID.Device)
			for _, h := range e.holdersOfDevice(d.Index) {
				holders[h] = true
			}
		case !d.All && len(d.Reach) == 0:
			noNode = append(noNode, d.ID.Device)
		}
	}
	var parts []string
	add := func(devs []string, what string) {
		if len(devs) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(devs), what, sample(devs)))
		}
	}
	add(inUse, "are in use")
	add(tainted, "have a NoSchedule/NoExecute taint the request does not tolerate")
	add(tooBig, "need more counters than their counter set has free")
	if len(tooBig) > 0 && len(holders) > 0 {
		parts[len(parts)-1] += " after existing allocations"
	}
	add(noCapacity, "lack a requested capacity or allow no such amount of it (value or requestPolicy)")
	add(noNode, "are reachable from no known node")
	r.Message = fmt.Sprintf("request %s: %d devices of class %s match, but none can be used: %s", a.Name, len(matching), className, strings.Join(parts, "; "))
	r.Claims = sortedSet(holders)
	if len(r.Claims) > 0 {
		r.Message += "; used by " + e.claimsText(r.Claims)
	}
	return r, true
}

func sample(xs []string) string {
	if len(xs) <= 3 {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:3], ", ") + ", ..."
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// list renders "a", "a and b", "a, b and c".
func list(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
