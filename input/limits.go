package input

import "fmt"

// Size limits of one run, beyond the loader's MaxObjects and MaxDocBytes
// (docs/limits.md). Past them a command fails with an error naming the
// limit instead of exhausting memory: the problem builder keeps per-device
// CEL results for every selector, and the encoder's models grow with
// claims times candidate devices.
const (
	MaxDevices = 500_000 // devices over all ResourceSlices
	MaxClaims  = 100_000 // ResourceClaims, pending and allocated
	MaxNodes   = 100_000 // Node objects
)

// CheckLimits fails when objs exceed MaxDevices, MaxClaims or MaxNodes.
func CheckLimits(objs *Objects) error {
	devices := 0
	for _, s := range objs.Slices {
		devices += len(s.Spec.Devices)
	}
	switch {
	case devices > MaxDevices:
		return fmt.Errorf("%d devices in %d ResourceSlices: more than drasat's limit of %d per run (docs/limits.md); split the input", devices, len(objs.Slices), MaxDevices)
	case len(objs.Claims) > MaxClaims:
		return fmt.Errorf("%d ResourceClaims: more than drasat's limit of %d per run (docs/limits.md); split the input", len(objs.Claims), MaxClaims)
	case len(objs.Nodes) > MaxNodes:
		return fmt.Errorf("%d Nodes: more than drasat's limit of %d per run (docs/limits.md)", len(objs.Nodes), MaxNodes)
	}
	return nil
}
