package alloc

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// AllocationResult builds status.allocation exactly as the kube-scheduler's
// allocator does: results in request order, class then claim config, and
// the node selector of createNodeSelector.
func AllocationResult(p *model.Problem, a *Assignment) (*resourceapi.AllocationResult, error) {
	c := a.Claim
	out := &resourceapi.AllocationResult{}
	chosen := map[int]int{} // request -> alternative
	for _, pk := range a.Picks {
		alt := c.Requests[pk.Req].Alternatives[pk.Alt]
		dev := p.Devices[pk.Dev]
		r := resourceapi.DeviceRequestAllocationResult{
			Request: alt.Name,
			Driver:  dev.ID.Driver,
			Pool:    dev.ID.Pool,
			Device:  dev.ID.Device,
		}
		if alt.AdminAccess {
			r.AdminAccess = ptr.To(true)
		}
		// As upstream's allocator: the request's tolerations (the taint
		// eviction controller reads them here), the device's binding
		// conditions whenever it has them, and the slice's
		// skipNodeOperations.
		r.Tolerations = slices.Clone(alt.Tolerations)
		r.BindingConditions = slices.Clone(dev.Spec.BindingConditions)
		r.BindingFailureConditions = slices.Clone(dev.Spec.BindingFailureConditions)
		r.SkipNodeOperations = slices.Clone(dev.Slice.Spec.SkipNodeOperations)
		if dev.MultiAlloc {
			r.ShareID = shareID(c, len(out.Devices.Results), dev.ID)
			if consumed := alt.ConsumedCapacity(pk.Dev); len(consumed) > 0 {
				r.ConsumedCapacity = make(map[resourceapi.QualifiedName]resource.Quantity, len(consumed))
				for name, q := range consumed {
					r.ConsumedCapacity[name] = q.DeepCopy()
				}
			}
		}
		out.Devices.Results = append(out.Devices.Results, r)
		chosen[pk.Req] = pk.Alt
	}
	out.Devices.Config = configs(c, chosen)
	ns, err := nodeSelector(p, a)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", c.Key, err)
	}
	out.NodeSelector = ns
	return out, nil
}

// configs copies class configs (once per class, listing the requests that
// use it) and then claim configs, as the allocator does.
func configs(c *model.Claim, chosen map[int]int) []resourceapi.DeviceAllocationConfiguration {
	var out []resourceapi.DeviceAllocationConfiguration
	type span struct{ start, end int }
	classSpan := map[string]span{}
	for ri, req := range c.Requests {
		ai, ok := chosen[ri]
		if !ok {
			continue
		}
		alt := req.Alternatives[ai]
		if sp, ok := classSpan[alt.Class.Name]; ok {
			for i := sp.start; i < sp.end; i++ {
				out[i].Requests = append(out[i].Requests, alt.Name)
			}
			continue
		}
		start := len(out)
		for _, cfg := range alt.Class.Spec.Config {
			out = append(out, resourceapi.DeviceAllocationConfiguration{
				Source:              resourceapi.AllocationConfigSourceClass,
				Requests:            []string{alt.Name},
				DeviceConfiguration: cfg.DeviceConfiguration,
			})
		}
		classSpan[alt.Class.Name] = span{start, len(out)}
	}
	for _, cfg := range c.Obj.Spec.Devices.Config {
		if len(cfg.Requests) == 0 {
			out = append(out, resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: cfg.DeviceConfiguration})
			continue
		}
		for ri, req := range c.Requests {
			name := req.Name
			if slices.Contains(cfg.Requests, name) {
				out = append(out, resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, Requests: cfg.Requests, DeviceConfiguration: cfg.DeviceConfiguration})
				break
			}
			if ai, ok := chosen[ri]; ok && req.FirstAvail && slices.Contains(cfg.Requests, req.Alternatives[ai].Name) {
				out = append(out, resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, Requests: cfg.Requests, DeviceConfiguration: cfg.DeviceConfiguration})
				break
			}
		}
	}
	// A config that names every request applies to all: clear Requests.
	for i := range out {
		if len(out[i].Requests) == 0 {
			continue
		}
		all := true
		for ri, req := range c.Requests {
			if slices.Contains(out[i].Requests, req.Name) {
				continue
			}
			if ai, ok := chosen[ri]; ok && req.FirstAvail && slices.Contains(out[i].Requests, req.Alternatives[ai].Name) {
				continue
			}
			all = false
			break
		}
		if all {
			out[i].Requests = nil
		}
	}
	return out
}

// nodeSelector follows the allocator's createNodeSelector: pin to the node
// when any device is node-local or binds to its node, merge the devices'
// selectors otherwise, and none when all devices are everywhere.
func nodeSelector(p *model.Problem, a *Assignment) (*corev1.NodeSelector, error) {
	term := corev1.NodeSelectorTerm{}
	node := a.Node
	if node < 0 {
		node = bindingNode(p, a)
	}
	for _, pk := range a.Picks {
		dev := p.Devices[pk.Dev]
		if dev.NodeLocal || dev.BindsToNode {
			if node < 0 {
				return nil, fmt.Errorf("device %s needs a node, none chosen", dev.ID)
			}
			return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key:      "metadata.name",
					Operator: corev1.NodeSelectorOpIn,
					Values:   []string{p.Nodes[node].Name},
				}},
			}}}, nil
		}
		if dev.Selector != nil {
			switch len(dev.Selector.NodeSelectorTerms) {
			case 0:
			case 1:
				addRequirements(dev.Selector.NodeSelectorTerms[0].MatchFields, &term.MatchFields)
				addRequirements(dev.Selector.NodeSelectorTerms[0].MatchExpressions, &term.MatchExpressions)
			default:
				return nil, fmt.Errorf("device %s: node selector with %d terms is not supported", dev.ID, len(dev.Selector.NodeSelectorTerms))
			}
		}
	}
	if len(term.MatchFields) > 0 || len(term.MatchExpressions) > 0 {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}, nil
	}
	return nil, nil
}

// bindingNode is the node a claim placed on no particular node is pinned
// to when one of its devices has bindsToNode: such devices are available
// on every node (a node-local one chooses the node), and the scheduler pins
// the allocation to the node of the pod, so the first node in name order
// that reaches all of the claim's devices. -1 when no device binds to its
// node or no node is known.
func bindingNode(p *model.Problem, a *Assignment) int {
	binds := false
	for _, pk := range a.Picks {
		binds = binds || p.Devices[pk.Dev].BindsToNode
	}
	if !binds {
		return -1
	}
	for n := range p.Nodes {
		all := true
		for _, pk := range a.Picks {
			all = all && p.Devices[pk.Dev].Reaches(n)
		}
		if all {
			return n
		}
	}
	return -1
}

func addRequirements(from []corev1.NodeSelectorRequirement, to *[]corev1.NodeSelectorRequirement) {
	for _, r := range from {
		if !slices.ContainsFunc(*to, func(x corev1.NodeSelectorRequirement) bool {
			return x.Key == r.Key && x.Operator == r.Operator && slices.Equal(x.Values, r.Values)
		}) {
			*to = append(*to, r)
		}
	}
}

// shareNamespace is the UUID namespace of drasat's share IDs.
var shareNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://drasat.dev/shareID"))

// shareID identifies one share of a shared device. The scheduler's
// allocator draws a random (time-based) UUID; drasat derives a name-based
// one (UUID version 5) from the claim, the result's position and the
// device, so that the same input gives the same output. Both are valid
// UUIDs, unique per share, which is all the API asks of them.
func shareID(c *model.Claim, i int, dev input.DeviceID) *types.UID {
	name := fmt.Sprintf("%s/%s/%s/%d/%s/%s/%s", c.Obj.Namespace, c.Obj.Name, c.Obj.UID, i, dev.Driver, dev.Pool, dev.Device)
	id := types.UID(uuid.NewSHA1(shareNamespace, []byte(name)).String())
	return &id
}
