package bound

import "github.com/drasat/drasat/model"

// HasLayouts tells whether b's type is priced from enumerated layouts.
func (r *Relaxation) HasLayouts(b *Bin) bool { return r.layoutsOf(r.types[b.Type]) != nil }

// LayoutValue is what the bound adds for one bin of b's type at π.
func (r *Relaxation) LayoutValue(b *Bin, price []float64) float64 {
	v, _ := r.layoutsOf(r.types[b.Type]).best(price)
	return v
}

// PatternStats counts classes, classes held to one bin, and pattern items.
func (r *Relaxation) PatternStats() (classes, local, items int) {
	for _, k := range r.classes {
		if r.local(k) {
			local++
		}
	}
	return len(r.classes), local, len(r.patternItems().items)
}

// ClassOf is the index (NodeClass.Class) of c's class in na's relaxation;
// -1 when c has none.
func ClassOf(na *NodeAggregate, c *model.Claim) int {
	for i, k := range na.r.classes {
		if k.key == c.ClassKey() {
			return i
		}
	}
	return -1
}
