package encode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// FuzzEncode builds problems from arbitrary input (seeded with the
// examples, one directory per stream, and the hostile inputs of
// testdata/fuzz/FuzzEncode) and encodes their claims with and without
// named groups: no panic, no hang, and a model with all groups assumed is
// satisfiable exactly when the plain model is. Each input gets a small
// budget (building, solving) and larger problems are skipped, so that the
// fuzzer tries thousands of inputs a minute instead of waiting for hard
// instances: hard search is what the brute-force tests are for.
func FuzzEncode(f *testing.F) {
	dirs := map[string]*bytes.Buffer{}
	err := filepath.Walk("../examples", func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.ToLower(filepath.Ext(path)) != ".yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		d := filepath.Dir(path)
		if dirs[d] == nil {
			dirs[d] = &bytes.Buffer{}
		}
		dirs[d].Write(b)
		dirs[d].WriteString("\n---\n")
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range dirs {
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _, err := input.Load([]string{"-"}, bytes.NewReader(data))
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p, err := model.Build(ctx, objs, model.Options{})
		if err != nil || len(p.Devices) > 300 || len(p.Claims) > 40 {
			return
		}
		plain, err := Encode(context.Background(), p, p.Claims, Options{})
		if err != nil {
			return // counters too fine to encode: a clean error
		}
		grouped, err := Encode(context.Background(), p, p.Claims, Options{Groups: true, PerClaim: true})
		if err != nil {
			t.Fatalf("grouped encoding fails where the plain one works: %v", err)
		}
		// Ask for every claim at once; both models must agree (an answer
		// not found within the budget skips the input).
		deadline := time.Now().Add(100 * time.Millisecond)
		var want []bool
		for _, m := range []*Model{plain, grouped} {
			s := solver.New(m.C, m.Clauses)
			var as []z.Lit
			for _, u := range m.Units {
				as = append(as, u.AtLeast(m.C, len(u.Claims)))
			}
			for _, g := range m.Groups {
				as = append(as, g.Lit)
			}
			r := s.Solve(ctx, deadline, as...)
			if r == solver.Unknown {
				return
			}
			want = append(want, r == solver.Sat)
		}
		if want[0] != want[1] {
			t.Fatalf("plain model sat=%v, grouped model with all groups sat=%v", want[0], want[1])
		}
	})
}
