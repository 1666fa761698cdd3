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
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// Nothing listens there: the command must fail before connecting.
	nodes := filepath.Join(dir, "nodes.yaml")
	for f, text := range map[string]string{kc: `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, nodes: "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"} {
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
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
