package mip

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// CBCPath is the CBC executable on PATH ("" when it is not installed:
// `apt-get install coinor-cbc`).
func CBCPath() string {
	p, err := exec.LookPath("cbc")
	if err != nil {
		return ""
	}
	return p
}

// SolveCBC runs CBC on the LP file lp with a wall-time limit and reads its
// solution: `cbc FILE timeMode elapsed sec SECONDS threads 1 solve solu OUT`. One thread
// keeps the run deterministic. The status says whether CBC proved its
// answer ("Optimal") or stopped on the limit ("Stopped on time").
func SolveCBC(ctx context.Context, lp string, limit time.Duration) (*Solution, error) {
	cbc := CBCPath()
	if cbc == "" {
		return nil, fmt.Errorf("cbc not found on PATH (Debian: apt-get install coinor-cbc)")
	}
	dir, err := os.MkdirTemp("", "drasat-cbc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "solution.txt")
	secs := strconv.Itoa(max(1, int(limit.Seconds())))
	// timeMode elapsed: the limit is wall time (CBC's default is CPU time,
	// which a loaded machine stretches far past the caller's deadline).
	cmd := exec.CommandContext(ctx, cbc, lp, "timeMode", "elapsed", "sec", secs, "threads", "1", "solve", "solu", out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("cbc %s: %v\n%s", lp, err, log)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, fmt.Errorf("cbc %s wrote no solution: %v\n%s", lp, err, log)
	}
	defer f.Close()
	return ReadCBCSolution(f)
}
