package bench

import (
	"fmt"
	"github.com/drasat/drasat/input"
)

// CheckSize refuses a size whose instance would pass drasat's input limits
// (docs/limits.md: model.MaxDevices, model.MaxClaims, model.MaxNodes)
// before anything is generated: a size like 100000x100000:1 would
// otherwise exhaust memory building ten billion GPUs. Devices per GPU (or
// per 16-host TPU pool) are counted on a one-unit instance, so the check
// follows the generators.
func CheckSize(scenario string, sz Size, opts GenerateOptions) error {
	if sz.Claims > input.MaxClaims {
		return fmt.Errorf("size %s: %d claims, more than drasat's limit of %d", sz, sz.Claims, input.MaxClaims)
	}
	if sz.Nodes > input.MaxNodes {
		return fmt.Errorf("size %s: %d nodes, more than drasat's limit of %d", sz, sz.Nodes, input.MaxNodes)
	}
	var units int // GPUs, or 16-host TPU pools
	var probe Size
	switch scenario {
	case "mig", "modes":
		g := sz.GPUs
		if g == 0 {
			g = 8 // the generators' default; modes' is smaller
		}
		if g > input.MaxDevices || sz.Nodes > input.MaxDevices/g {
			return fmt.Errorf("size %s: %d nodes of %d GPUs, more devices than drasat's limit of %d", sz, sz.Nodes, g, input.MaxDevices)
		}
		units, probe = sz.Nodes*g, Size{Nodes: 2, GPUs: 1} // two nodes: a mixed fleet alternates models
	case "tpu":
		units, probe = sz.Nodes/16, Size{Nodes: 16}
	default:
		return nil // openb: bounded by its trace
	}
	insts, err := Generate(scenario, probe, 1, opts)
	if err != nil {
		return err
	}
	perUnit := 0
	for _, s := range insts[0].Objs.Slices {
		perUnit += len(s.Spec.Devices)
	}
	if scenario != "tpu" {
		perUnit = (perUnit + 1) / 2 // per GPU, rounded up
	}
	if perUnit > 0 && units > input.MaxDevices/perUnit {
		return fmt.Errorf("size %s: about %d devices (%d per %s), more than drasat's limit of %d",
			sz, units*perUnit, perUnit, map[bool]string{true: "16 TPU hosts", false: "GPU"}[scenario == "tpu"], input.MaxDevices)
	}
	return nil
}
