package model

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// celEnv compiles and evaluates device selectors with the scheduler's own CEL
// package, caching results per (expression, device): many claims share
// selectors, and a device's answer never changes within a run.
type celEnv struct {
	cache   *dracel.Cache
	results map[string][]celResult // expression -> per device
}

type celResult uint8

const (
	celUnknown celResult = iota
	celTrue
	celFalse
	celError
)

func newCELEnv() *celEnv {
	return &celEnv{
		cache:   dracel.NewCache(1000, dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}),
		results: map[string][]celResult{},
	}
}

// compile reports a compile error for expr.
func (e *celEnv) compile(expr string) error {
	res := e.cache.GetOrCompile(expr)
	if res.Error != nil {
		return fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	return nil
}

// matches evaluates expr for device d (cached). Compile errors must have
// been checked with compile.
func (e *celEnv) matches(expr string, d *Device, nDevices int) (bool, error) {
	rs := e.results[expr]
	if rs == nil {
		rs = make([]celResult, nDevices)
		e.results[expr] = rs
	}
	switch rs[d.Index] {
	case celTrue:
		return true, nil
	case celFalse:
		return false, nil
	}
	ok, err := e.eval(expr, d.ID.Driver, d.Spec)
	switch {
	case err != nil:
		rs[d.Index] = celError
		return false, err
	case ok:
		rs[d.Index] = celTrue
	default:
		rs[d.Index] = celFalse
	}
	return ok, nil
}

func (e *celEnv) eval(expr, driver string, dev *resourceapi.Device) (bool, error) {
	res := e.cache.GetOrCompile(expr)
	if res.Error != nil {
		return false, fmt.Errorf("CEL expression %q: %s", expr, res.Error.Detail)
	}
	ok, _, err := res.DeviceMatches(context.Background(), dracel.Device{
		Driver:                   driver,
		AllowMultipleAllocations: dev.AllowMultipleAllocations,
		Attributes:               dev.Attributes,
		Capacity:                 dev.Capacity,
	})
	if err != nil {
		return false, fmt.Errorf("CEL expression %q on device %s: %w", expr, dev.Name, dracel.EnhanceRuntimeError(err))
	}
	return ok, nil
}

// attributeValue looks an attribute up as the allocator does: the fully
// qualified name first, then the bare id when the domain is the driver's.
// It returns a canonical string ("" when missing) so values compare by ==.
func attributeValue(driver string, dev *resourceapi.Device, name string) string {
	attr, ok := dev.Attributes[resourceapi.QualifiedName(name)]
	if !ok {
		i := strings.Index(name, "/")
		if i < 0 || name[:i] != driver {
			return ""
		}
		attr, ok = dev.Attributes[resourceapi.QualifiedName(name[i+1:])]
		if !ok {
			return ""
		}
	}
	switch {
	case attr.StringValue != nil:
		return "s:" + *attr.StringValue
	case attr.IntValue != nil:
		return fmt.Sprintf("i:%d", *attr.IntValue)
	case attr.BoolValue != nil:
		return fmt.Sprintf("b:%t", *attr.BoolValue)
	case attr.VersionValue != nil:
		return "v:" + *attr.VersionValue
	}
	return ""
}
