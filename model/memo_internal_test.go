package model

import (
	"context"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
)

// The memo forgets a selector's entries on the devices once builds stop
// using it (its claims allocated or gone): a controller that sees claims
// with ever new selectors must not keep them all on every device.
func TestMemoForgetsUnusedSelectors(t *testing.T) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(costlyPool(5, "true")))
	if err != nil {
		t.Fatal(err)
	}
	once, _, err := input.Load([]string{"-"}, strings.NewReader(costlyPool(5, "true")+
		claimYAML("once", "costly", "        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].idx != 3\"}\n")))
	if err != nil {
		t.Fatal(err)
	}
	once.Slices = objs.Slices // the same slice objects, as an informer's
	m := NewMemo()
	entries := func() (n int) {
		for _, md := range m.prev {
			n += len(md.exprs)
		}
		return n
	}
	if _, err := Build(context.Background(), once, Options{Memo: m}); err != nil {
		t.Fatal(err)
	}
	withOnce := entries()
	for i := 0; i < memoKeepBuilds+1; i++ {
		if _, err := Build(context.Background(), objs, Options{Memo: m}); err != nil {
			t.Fatal(err)
		}
	}
	// 5 devices: the class's selector is kept, the claim's is not.
	if withOnce != 10 || entries() != 5 {
		t.Fatalf("entries: %d with the claim's selector, %d after %d builds without it; want 10 and 5", withOnce, entries(), memoKeepBuilds+1)
	}
}
