package model

import "testing"

// Split drops claims: a suffix leaves the others shared and numbered as
// they were; a claim dropped before kept ones renumbers copies of them,
// and p keeps its own numbering.
func TestSplit(t *testing.T) {
	p := buildYAML(t, costlyPool(4, "true")+claimYAML("a", "costly", "")+claimYAML("b", "costly", ""))
	if len(p.Claims) != 3 {
		t.Fatalf("%d claims, want 3", len(p.Claims))
	}
	q, dropped := p.Split(func(c *Claim) bool { return c.Key == "default/b" })
	if len(q.Claims) != 2 || len(dropped) != 1 || dropped[0] != p.Claims[2] || q.Claims[0] != p.Claims[0] || q.Claims[1] != p.Claims[1] {
		t.Fatalf("suffix split: %d kept, %d dropped; want the first two shared, b dropped", len(q.Claims), len(dropped))
	}
	q, dropped = p.Split(func(c *Claim) bool { return c.Key == "default/a" })
	if len(q.Claims) != 2 || len(dropped) != 1 || dropped[0].Key != "default/a" {
		t.Fatalf("split of a: %d kept, %d dropped", len(q.Claims), len(dropped))
	}
	for i, c := range q.Claims {
		if c.Index != i {
			t.Errorf("kept claim %s numbered %d at %d", c.Key, c.Index, i)
		}
	}
	if q.Claims[1].Key != "default/b" || q.Claims[1] == p.Claims[2] || p.Claims[2].Index != 2 {
		t.Errorf("b: %s, shared %v, p's index %d; want a renumbered copy, p's left at 2", q.Claims[1].Key, q.Claims[1] == p.Claims[2], p.Claims[2].Index)
	}
}
