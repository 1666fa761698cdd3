package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --timeout 0 or negative is a usage error naming the flag, not a silent
// default.
func TestTimeoutMustBePositive(t *testing.T) {
	dir := filepath.Join(examplesDir, "mig-a100")
	for _, cmd := range [][]string{
		{"allocate", "-f", dir},
		{"explain", "-f", dir, "--claim", "mig-devices"},
		{"validate", "-f", dir},
	} {
		for _, v := range []string{"0s", "-5s"} {
			args := append(append([]string(nil), cmd...), "--timeout", v)
			stdout, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), "--timeout") || stdout != "" {
				t.Errorf("%v: err %v, stdout %q; want an error naming --timeout", args, err, stdout)
			}
		}
	}
}
