package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gcPercent reads GOGC without changing it, so that it cannot race
// with the command setting it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// Files are read at readGCPercent, and the process's GOGC is set back
// once they are read. The input comes from a pipe, so that the test can
// look while the command waits for it.
func TestReadingGCPercent(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the user's setting is kept")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	doc, err := os.ReadFile("../../examples/mig-a100/20-slices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin; r.Close() }()
	done := make(chan error, 1)
	go func() {
		_, _, err := runApp(t, "validate", "-f", "-")
		done <- err
	}()
	while := 100
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if while = gcPercent(); while == readGCPercent {
			break
		}
	}
	if _, err := w.Write(doc); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if while != readGCPercent {
		t.Errorf("GOGC while reading %d, want %d", while, readGCPercent)
	}
	if after := gcPercent(); after != 100 {
		t.Errorf("GOGC after reading %d, want 100 set back", after)
	}
}
