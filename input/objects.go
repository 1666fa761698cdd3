// Package input reads the Kubernetes objects a run works on: YAML and JSON
// files and streams (Load), the KEP-4815 draft's slices (FlattenDraft), the
// DeviceTaintRules' taints (ApplyTaintRules) and the size limits of one run
// (CheckLimits). It holds the objects as the API serves them and derives
// nothing from them: the problem built from them is package model's, and the
// independent checker (package check) imports this package only, so that it
// shares no code with the engine by construction.
package input

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DeviceID names a device the way allocation results do.
type DeviceID struct {
	Driver, Pool, Device string
}

func (id DeviceID) String() string { return id.Driver + "/" + id.Pool + "/" + id.Device }

// Objects is everything an allocation run reads, in input order.
type Objects struct {
	Slices  []*resourceapi.ResourceSlice
	Classes []*resourceapi.DeviceClass
	Claims  []*resourceapi.ResourceClaim
	Nodes   []*corev1.Node
	Pods    []*corev1.Pod
	// TaintRules are DeviceTaintRules: their taints apply to the devices
	// they select (ApplyTaintRules).
	TaintRules []*resourceapi.DeviceTaintRule

	// CompatibleOnlyWith holds the research extension
	// `compatibleOnlyWith: {expression: ...}` found on devices in files. The API
	// server drops unknown fields, so it only exists in files.
	CompatibleOnlyWith map[DeviceID]string

	// Draft holds the slices read in the KEP-4815 draft's form
	// (DraftAPIVersion); Slices holds what they flatten to.
	Draft []*DraftResourceSlice

	// Origin tells where each object came from ("file.yaml#3"), keyed by
	// "Kind namespace/name", for error messages.
	Origin map[string]string
}

// PinnedNodes maps claims ("namespace/name") to the node of a bound pod
// that uses them (reserved for it, or named in its spec or status): such a
// claim can only be allocated on that node.
func (objs *Objects) PinnedNodes() map[string]string {
	out := map[string]string{}
	// The node of each bound pod by namespace and name (the last such pod
	// of a name, as a scan of the pods in order would find).
	boundTo := map[[2]string]string{}
	for _, p := range objs.Pods {
		if p.Spec.NodeName != "" {
			boundTo[[2]string{p.Namespace, p.Name}] = p.Spec.NodeName
		}
	}
	for _, c := range objs.Claims {
		for _, ref := range c.Status.ReservedFor {
			if ref.Resource != "pods" {
				continue
			}
			if node, ok := boundTo[[2]string{c.Namespace, ref.Name}]; ok {
				out[c.Namespace+"/"+c.Name] = node
			}
		}
	}
	for _, p := range objs.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				out[p.Namespace+"/"+*rc.ResourceClaimName] = p.Spec.NodeName
			}
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				out[p.Namespace+"/"+*st.ResourceClaimName] = p.Spec.NodeName
			}
		}
	}
	return out
}
