package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two runs of reconcile --once never share a Lease identity.
func TestUniqueIdentity(t *testing.T) {
	a, err := uniqueIdentity("drasat-reconcile")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := uniqueIdentity("drasat-reconcile")
	if a == b || !strings.HasPrefix(a, "drasat-reconcile-") {
		t.Errorf("identities %q and %q; want two different ones with the prefix", a, b)
	}
}

// unreachableKubeconfig is a kubeconfig whose server nothing listens on:
// a command given it must fail before connecting.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// A write timeout that does not fit between the renew deadline and the
// lease duration is refused at start-up, before any request.
func TestWriteTimeoutMustFitLease(t *testing.T) {
	kc := unreachableKubeconfig(t)
	for _, cmd := range [][]string{{"controller", "--metrics-addr="}, {"reconcile", "--once"}} {
		args := append(cmd, "--kubeconfig="+kc, "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--write-timeout=3s")
		_, _, err := runApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--write-timeout (3s) must be less than") {
			t.Errorf("%v: %v; want the write timeout refused", cmd, err)
		}
	}
}
