package alloc

// unionFind is a disjoint-set forest over 0..n-1 with path halving: the
// components of the problem and the realisation's groups of bins.
type unionFind []int

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for i := range u {
		u[i] = i
	}
	return u
}

// find is x's representative.
func (u unionFind) find(x int) int {
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

// union joins the sets of a and b.
func (u unionFind) union(a, b int) { u[u.find(a)] = u.find(b) }
