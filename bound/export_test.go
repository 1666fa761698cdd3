package bound

// HasLayouts tells whether b's type is priced from enumerated layouts.
func (r *Relaxation) HasLayouts(b *Bin) bool { return r.layoutsOf(r.types[b.Type]) != nil }

// LayoutValue is what the bound adds for one bin of b's type at π.
func (r *Relaxation) LayoutValue(b *Bin, price []float64) float64 {
	v, _ := r.layoutsOf(r.types[b.Type]).best(price)
	return v
}
