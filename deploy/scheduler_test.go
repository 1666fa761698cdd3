package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSchedulerProfileLoads: the real kube-scheduler (v1.37, as the e2e
// tests build it into .cache/e2e-bin, or $E2E_BIN) accepts
// scheduler/kube-scheduler-config.yaml, and the configuration it would
// run with scores NodeResourcesFit by MostAllocated over CPU and memory.
// A misspelt strategy is refused, so the check can fail.
func TestSchedulerProfileLoads(t *testing.T) {
	binDir := os.Getenv("E2E_BIN")
	if binDir == "" {
		binDir = filepath.Join("..", ".cache", "e2e-bin")
	}
	sched, err := filepath.Abs(filepath.Join(binDir, "kube-scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sched); err != nil {
		t.Skipf("no kube-scheduler binary (make e2e-bin builds it): %v", err)
	}
	profile, err := os.ReadFile(filepath.Join("scheduler", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The scheduler reads its kubeconfig from the file; it never connects
	// with --write-config-to.
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(cfg string) (string, error) {
		in, out := filepath.Join(dir, "in.yaml"), filepath.Join(dir, "out.yaml")
		cfg += "clientConnection:\n  kubeconfig: " + kc + "\nleaderElection:\n  leaderElect: false\n"
		if err := os.WriteFile(in, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := exec.Command(sched, "--config", in, "--write-config-to", out).CombinedOutput()
		if err != nil {
			return string(b), err
		}
		written, err := os.ReadFile(out)
		return string(written), err
	}
	written, err := load(string(profile))
	if err != nil {
		t.Fatalf("kube-scheduler refuses the profile: %v\n%s", err, written)
	}
	var cfg struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
			PluginConfig  []struct {
				Name string `json:"name"`
				Args struct {
					ScoringStrategy *struct {
						Type      string `json:"type"`
						Resources []struct {
							Name   string `json:"name"`
							Weight int    `json:"weight"`
						} `json:"resources"`
					} `json:"scoringStrategy"`
				} `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal([]byte(written), &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			if p.SchedulerName != "default-scheduler" || pc.Name != "NodeResourcesFit" || pc.Args.ScoringStrategy == nil {
				continue
			}
			found = true
			st := pc.Args.ScoringStrategy
			var res []string
			for _, r := range st.Resources {
				res = append(res, r.Name)
			}
			if st.Type != "MostAllocated" || strings.Join(res, ",") != "cpu,memory" {
				t.Errorf("NodeResourcesFit scores by %s over %v, want MostAllocated over cpu and memory", st.Type, res)
			}
		}
	}
	if !found {
		t.Errorf("the configuration the scheduler would run has no NodeResourcesFit scoringStrategy for default-scheduler:\n%s", written)
	}
	if out, err := load(strings.Replace(string(profile), "type: MostAllocated", "type: MostAlocated", 1)); err == nil || !strings.Contains(out, "MostAlocated") {
		t.Errorf("a misspelt strategy was accepted (%v):\n%s", err, out)
	}
}
