package hold_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/model"
)

// TestSimulateArrivals replays the load test's arrival patterns (k8s/e2e
// load_test.go: the claims of `drasat bench -s mig` seed 1, arriving as a
// burst, a stream or waves) in simulated time against a model of the
// controller's window: a pass starts once no demand arrived for
// BatchWindow or MaxWindow after the first change, or when held claims are
// due; each pass solves every pending claim with the allocated ones fixed
// (solving takes no simulated time). It prints, per pattern and size, the
// claims admitted without and with holding, against offline, their
// latency and the device-seconds held claims left idle. It is a design
// tool, slow at 1,000 claims: HOLD_SIM=1 runs it; SIM_SIZES
// (8x8:300,16x8:1000), SIM_PATTERNS (burst,stream,waves,departures: the
// stream, each admitted claim leaving 30-90 s later), HOLD_MAX, HOLD_HORIZON, HOLD_LOOKBACK, HOLD_MINSPAN,
// HOLD_SCENARIOS, HOLD_TIMEOUT, HOLD_IDLE (Options.IdlePerClaim),
// HOLD_MINQUIET, HOLD_QUIETFACTOR, HOLD_SEED (the scenario sampler's) steer it,
// SIM_SEED (default 1) picks the instance;
// SIM_TRACE=1 logs every pass that holds or declines to.
func TestSimulateArrivals(t *testing.T) {
	if os.Getenv("HOLD_SIM") == "" {
		t.Skip("HOLD_SIM=1 runs the arrival simulation")
	}
	sizes := strings.Split(envOr("SIM_SIZES", "8x8:300,16x8:1000"), ",")
	patterns := strings.Split(envOr("SIM_PATTERNS", "burst,stream,waves,departures"), ",")
	opts := hold.Options{
		MaxHold:   envDur(t, "HOLD_MAX", 0),
		Horizon:   envDur(t, "HOLD_HORIZON", 0),
		Lookback:  envDur(t, "HOLD_LOOKBACK", 0),
		MinSpan:   envDur(t, "HOLD_MINSPAN", 0),
		Scenarios: envInt(t, "HOLD_SCENARIOS", 0),
		Timeout:   envDur(t, "HOLD_TIMEOUT", 0),
		Objective: alloc.MaxClaims, Policy: alloc.Binpack,
		IdlePerClaim: envDur(t, "HOLD_IDLE", 0),
		MinQuiet:     envDur(t, "HOLD_MINQUIET", 0),
		QuietFactor:  envFloat(t, "HOLD_QUIETFACTOR", 0),
		Seed:         uint64(envInt(t, "HOLD_SEED", 0)),
	}
	for _, size := range sizes {
		sz, err := bench.ParseSize(size)
		if err != nil {
			t.Fatal(err)
		}
		insts, err := bench.Generate("mig", sz, uint64(envInt(t, "SIM_SEED", 1)), bench.GenerateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in := insts[0]
		offline := solveAll(t, in)
		for _, pat := range patterns {
			base := simulate(t, in, pat, nil)
			with := simulate(t, in, pat, hold.New(opts))
			t.Logf("| %s | %s | %d | %s | %s |", size, pat, offline, base.row(offline), with.row(offline))
		}
	}
}

type simResult struct {
	admitted, passes, maxHeld int
	last, p50, p90            time.Duration
	largeAdmitted, large      int
	idle                      float64 // device-seconds held claims left idle
	declined                  int     // passes whose scenarios held claims the gain did not pay for
}

func (r simResult) row(offline int) string {
	return fmt.Sprintf("%d (%.0f %%), last %.0fs, p50 %.0fs, p90 %.0fs, idle %.0f device-s, %d passes, most held %d, declined %d, large %d/%d",
		r.admitted, 100*float64(r.admitted)/float64(offline), r.last.Seconds(), r.p50.Seconds(), r.p90.Seconds(), r.idle, r.passes, r.maxHeld, r.declined, r.largeAdmitted, r.large)
}

func solveAll(t *testing.T, in *bench.Instance) int {
	p, err := model.Build(context.Background(), in.Objs, model.Options{Compat: in.Compat})
	if err != nil {
		t.Fatal(err)
	}
	out, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return out.Stats.Admitted
}

// arrival is when (simulated, from 0) the i-th of n pending claims' pod is
// created, as load_test.go's createAt: stream 5 pods/s, 4 waves 30 s apart;
// departures is the stream.
func arrival(pattern string, i, n int) time.Duration {
	switch pattern {
	case "stream", "departures":
		return time.Duration(float64(i) / 5 * float64(time.Second))
	case "waves":
		return time.Duration(i*4/n) * 30 * time.Second
	}
	return 0
}

// lifetime is how long the i-th pending claim runs once admitted, in the
// departures pattern (forever in the others): 30 to 90 s, spread evenly
// over the claims.
func lifetime(pattern string, i int) time.Duration {
	if pattern != "departures" {
		return -1
	}
	return 30*time.Second + time.Duration(i*37%61)*time.Second
}

// The controller's window defaults (k8s: --batch-window, --max-window).
const (
	batchWindow = 2 * time.Second
	maxWindow   = 30 * time.Second
)

func simulate(t *testing.T, in *bench.Instance, pattern string, h *hold.Holder) simResult {
	ctx := context.Background()
	now := time.Duration(0)
	var running, pending []*resourceapi.ResourceClaim
	for _, c := range in.Objs.Claims {
		if c.Status.Allocation != nil {
			running = append(running, c)
		} else {
			pending = append(pending, c)
		}
	}
	n := len(pending)
	at := map[string]time.Duration{}
	life := map[string]time.Duration{}
	for i, c := range pending {
		at[c.Name] = arrival(pattern, i, n)
		life[c.Name] = lifetime(pattern, i)
	}
	ends := map[string]time.Duration{} // admitted claim -> when it leaves
	// nextDeparture is the first departure after now, if any.
	nextDeparture := func() (time.Duration, bool) {
		first, ok := time.Duration(0), false
		for _, e := range ends {
			if e > now && (!ok || e < first) {
				first, ok = e, true
			}
		}
		return first, ok
	}
	var heldDevices int // held by the last pass
	var heldAt time.Duration
	var res simResult
	for _, c := range pending {
		if size(c) >= large {
			res.large++
		}
	}
	var lat []time.Duration
	waiting := []*resourceapi.ResourceClaim{} // arrived, not admitted
	next := 0                                 // next pending claim to arrive
	var recheck time.Duration = -1
	for {
		// The window: from the first change (an arrival, a recheck, a
		// departure while claims wait), until quiet for batchWindow or
		// open for maxWindow.
		var events []time.Duration
		if next < n {
			events = append(events, at[pending[next].Name])
		}
		if recheck >= 0 {
			events = append(events, recheck)
		}
		if dep, ok := nextDeparture(); ok && len(waiting) > 0 {
			events = append(events, dep)
		}
		if len(events) == 0 {
			return finish(res, lat)
		}
		first := max(now, slices.Min(events))
		end := first + batchWindow
		for next < n && at[pending[next].Name] <= end && at[pending[next].Name] < first+maxWindow {
			end = max(end, at[pending[next].Name]+batchWindow)
			waiting = append(waiting, pending[next])
			if h != nil {
				h.Observe(start.Add(at[pending[next].Name]), pending[next].Name, pending[next])
			}
			next++
		}
		now = min(end, first+maxWindow)
		res.passes++
		res.idle += float64(heldDevices) * (now - heldAt).Seconds()
		heldDevices, heldAt = 0, now
		running = slices.DeleteFunc(running, func(c *resourceapi.ResourceClaim) bool {
			e, ok := ends[c.Name]
			if ok && e <= now {
				delete(ends, c.Name)
			}
			return ok && e <= now
		})
		objs := *in.Objs
		objs.Claims = append(slices.Clone(running), waiting...)
		if h != nil {
			objs.Claims = append(objs.Claims, h.Prototypes()...)
		}
		p, err := model.Build(ctx, &objs, model.Options{Compat: in.Compat})
		if err != nil {
			t.Fatal(err)
		}
		recheck = -1
		var d *hold.Decision
		if h != nil {
			keys := make([]string, len(p.Claims))
			for i, c := range p.Claims {
				keys[i] = c.Obj.Name
			}
			d, err = h.Decide(ctx, p, keys, start.Add(now))
			if err != nil {
				t.Fatal(err)
			}
			heldDevices = d.HeldDevices(p)
			if d.Declined > 0 {
				res.declined++
			}
			if os.Getenv("SIM_TRACE") != "" && (len(d.Held) > 0 || d.Declined > 0) {
				t.Logf("%s %.0fs: %d waiting, forecast %.0f, held %d (%d devices), declined %d, gain %.1f, idle %.0f device-s",
					pattern, now.Seconds(), len(waiting), d.Expected, len(d.Held), heldDevices, d.Declined, d.Gain, d.Idle)
			}
			p = d.Problem
			res.maxHeld = max(res.maxHeld, len(d.Held))
			if len(d.Held) > 0 {
				recheck = max(d.Recheck.Sub(start), now+time.Second)
			}
		}
		out, err := alloc.Run(ctx, p, alloc.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			d.Drop(out)
		}
		claims, err := alloc.Allocated(p, out)
		if err != nil {
			t.Fatal(err)
		}
		admitted := map[string]bool{}
		for _, c := range claims {
			if c.Status.Allocation != nil {
				running = append(running, c)
				if l := life[c.Name]; l >= 0 {
					ends[c.Name] = now + l
				}
				admitted[c.Name] = true
				res.admitted++
				lat = append(lat, now-at[c.Name])
				res.last = now
				if size(c) >= large {
					res.largeAdmitted++
				}
			}
		}
		waiting = slices.DeleteFunc(waiting, func(c *resourceapi.ResourceClaim) bool { return admitted[c.Name] })
	}
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func finish(r simResult, lat []time.Duration) simResult {
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p90 = lat[len(lat)/2], lat[len(lat)*9/10]
	}
	return r
}

// size is a claim's GPU memory in GB, read from its requests' MIG profile
// selectors, for the "large claims" figure (20 GB or more: half an A100).
func size(c *resourceapi.ResourceClaim) int {
	n := 0
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil {
			for _, s := range r.Exactly.Selectors {
				if s.CEL != nil {
					n += int(max(r.Exactly.Count, 1)) * profileMem(s.CEL.Expression)
				}
			}
		}
	}
	return n
}

const large = 20

// profileMem reads the memory of a MIG profile selector ("... profile ==
// '3g.20gb'": 20).
func profileMem(expr string) int {
	_, prof, ok := strings.Cut(expr, "profile == '")
	if !ok {
		return 0
	}
	_, mem, _ := strings.Cut(prof, ".")
	mem, _, _ = strings.Cut(mem, "gb")
	v, _ := strconv.Atoi(mem)
	return v
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func envDur(t *testing.T, k string, d time.Duration) time.Duration {
	v := os.Getenv(k)
	if v == "" {
		return d
	}
	x, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return x
}

func envFloat(t *testing.T, k string, d float64) float64 {
	v := os.Getenv(k)
	if v == "" {
		return d
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return x
}

func envInt(t *testing.T, k string, d int) int {
	v := os.Getenv(k)
	if v == "" {
		return d
	}
	x, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return x
}

// TestSimulateReleases replays the load test's departures (k8s/e2e
// load_test.go, LOAD_PATTERN=departures) offline: the burst solved whole,
// then every third pending claim's pod deleted, its claim released in
// steps (SIM_RELEASE_STEPS, default 1,2,4,10,25,100), each step followed
// by a solve of the claims still pending with every allocation fixed, as
// a controller that passes after each release does. It prints the claims
// admitted at the end per number of steps: what the controller's window
// gains by waiting until releases stop (docs/adapter.md, "Departures").
// A design tool: HOLD_SIM=1 runs it; SIM_SIZES (8x8:300) picks the size.
func TestSimulateReleases(t *testing.T) {
	if os.Getenv("HOLD_SIM") == "" {
		t.Skip("HOLD_SIM=1 runs the release simulation")
	}
	for _, size := range strings.Split(envOr("SIM_SIZES", "8x8:300"), ",") {
		sz, err := bench.ParseSize(size)
		if err != nil {
			t.Fatal(err)
		}
		insts, err := bench.Generate("mig", sz, 1, bench.GenerateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in := insts[0]
		var departing []string // the pending claims; every third leaves, as in the load test
		for _, cl := range in.Objs.Claims {
			if cl.Status.Allocation == nil {
				departing = append(departing, cl.Name)
			}
		}
		var gone []string
		for i, n := range departing {
			if i%3 == 0 {
				gone = append(gone, n)
			}
		}
		for _, f := range strings.Split(envOr("SIM_RELEASE_STEPS", "1,2,4,10,25,100"), ",") {
			steps, err := strconv.Atoi(f)
			if err != nil || steps < 1 {
				t.Fatalf("SIM_RELEASE_STEPS: %q is not a positive number", f)
			}
			claims := slices.Clone(in.Objs.Claims)
			admitted := func() int {
				objs := *in.Objs
				objs.Claims = claims
				p, err := model.Build(context.Background(), &objs, model.Options{Compat: in.Compat})
				if err != nil {
					t.Fatal(err)
				}
				out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range out.Assignments {
					r, err := alloc.AllocationResult(p, a)
					if err != nil {
						t.Fatal(err)
					}
					i := slices.IndexFunc(claims, func(c *resourceapi.ResourceClaim) bool { return c.Name == a.Claim.Obj.Name })
					c := claims[i].DeepCopy()
					c.Status.Allocation = r
					claims[i] = c
				}
				n := 0
				for _, c := range claims {
					if c.Status.Allocation != nil && slices.ContainsFunc(in.Objs.Claims, func(o *resourceapi.ResourceClaim) bool {
						return o.Name == c.Name && o.Status.Allocation == nil
					}) {
						n++
					}
				}
				return n
			}
			burst := admitted()
			per := (len(gone) + steps - 1) / steps
			end := 0
			for k := 0; k < len(gone); k += per {
				step := gone[k:min(k+per, len(gone))]
				claims = slices.DeleteFunc(claims, func(c *resourceapi.ResourceClaim) bool { return slices.Contains(step, c.Name) })
				end = admitted()
			}
			t.Logf("%s: the burst admitted %d; %d pods leave, released in %d steps, a solve after each: %d admitted at the end", size, burst, len(gone), steps, end)
		}
	}
}
