package bound

import "github.com/drasat/drasat/model"

// Claims with distinctAttribute (count 2 of 1g on two GPUs, by parentUUID)
// are split into single-device items that keep only their node in the
// per-node model. Realise hands such a claim's items out one a bin, so
// that the group of bins the SAT model then places it on has the distinct
// GPUs it needs; taking them slot by slot would put both on one GPU, which
// the SAT model must reject. Where the node's slots of its shape lie on
// fewer bins than it has items, the claim gets no bins: its group is then
// its whole node, whose SAT model may move a claim of one device to free
// a slot on another GPU.

// distinctDevices tells whether c has a distinctAttribute constraint.
func distinctDevices(c *model.Claim) bool {
	for _, con := range c.Constraints {
		if con.Kind == model.DistinctAttribute {
			return true
		}
	}
	return false
}
