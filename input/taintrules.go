package input

import (
	resourceapi "k8s.io/api/resource/v1"
)

// ApplyTaintRules returns the slices with the taints of DeviceTaintRules
// added to the devices they select, as the scheduler's ResourceSlice tracker
// does (k8s.io/dynamic-resource-allocation/resourceslice/tracker): a rule
// without deviceSelector selects nothing; driver, pool and device, when set,
// must equal the device's; the rule's taint is appended to the device's own.
// Slices no rule touches are returned as they are, the others as patched
// copies (the input is never modified).
func ApplyTaintRules(slices []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) []*resourceapi.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	out := make([]*resourceapi.ResourceSlice, len(slices))
	for i, s := range slices {
		patched := s
		for _, r := range rules {
			sel := r.Spec.DeviceSelector
			if sel == nil || sel.Driver != nil && *sel.Driver != s.Spec.Driver || sel.Pool != nil && *sel.Pool != s.Spec.Pool.Name {
				continue
			}
			for j := range s.Spec.Devices {
				if sel.Device != nil && *sel.Device != s.Spec.Devices[j].Name {
					continue
				}
				if patched == s {
					patched = s.DeepCopy()
				}
				patched.Spec.Devices[j].Taints = append(patched.Spec.Devices[j].Taints, r.Spec.Taint)
			}
		}
		out[i] = patched
	}
	return out
}
