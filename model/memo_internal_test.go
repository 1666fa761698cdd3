package model

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// The memo answers usablePools for the same slice and node objects and asks
// again when either list changes (a node relabelled is a new object); its
// answer is always usablePools' own.
func TestMemoUsablePools(t *testing.T) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(costlyPool(3, "true")))
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{"a": "b"}}}
	nodes := []*corev1.Node{node}
	m := NewMemo()
	same := func(what string, ns []*corev1.Node) *memoUsable {
		t.Helper()
		copies, issues := m.usablePools(objs.Slices, ns)
		wantCopies, wantIssues := usablePools(objs.Slices, ns)
		if !reflect.DeepEqual(copies, wantCopies) || !reflect.DeepEqual(issues, wantIssues) {
			t.Fatalf("%s: the memo's usable pools %v %v, usablePools %v %v", what, copies, issues, wantCopies, wantIssues)
		}
		return m.usable
	}
	first := same("first", nodes)
	if again := same("same objects", slices.Clone(nodes)); again != first {
		t.Fatal("the same slices and nodes were not answered from the memo")
	}
	relabelled := node.DeepCopy()
	relabelled.Labels["a"] = "c"
	if changed := same("a node relabelled", []*corev1.Node{relabelled}); changed == first {
		t.Fatal("a new node object was answered from the memo")
	}
	if changed := same("no nodes", nil); changed == first {
		t.Fatal("no nodes was answered from the memo")
	}
}
