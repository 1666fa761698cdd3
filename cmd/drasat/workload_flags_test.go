package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --workload-from is read at start-up, before any request: a file without
// claims is refused naming it, and the flag is refused with a policy that
// has no look-ahead.
func TestWorkloadFromRefusedAtStart(t *testing.T) {
	kc := unreachableKubeconfig(t)
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"controller", "--metrics-addr=", "--workload-from=" + nodes}, "nodes.yaml: no ResourceClaims"},
		{[]string{"reconcile", "--once", "--workload-from=" + nodes}, "nodes.yaml: no ResourceClaims"},
		{[]string{"controller", "--metrics-addr=", "--policy=binpack", "--workload-from=" + nodes}, "--workload-from is the frag look-ahead's workload; --policy is binpack"},
	} {
		_, _, err := runApp(t, append(tc.args, "--kubeconfig="+kc)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
}
