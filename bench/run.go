package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/reserve"
)

// Policy names.
const (
	PolicyUpstream = "upstream"
	PolicyFirstFit = "first-fit"
	PolicyFFD      = "first-fit-decreasing"
	PolicyBestFit  = "best-fit"
	PolicyFGD      = "fgd"
	// PolicyDrasatBinpack is drasat with the binpack lower level (no look-ahead).
	PolicyDrasatBinpack = "drasat-binpack"
	// PolicyDrasat is drasat's default: max-claims, then the frag look-ahead.
	PolicyDrasat = "drasat"
)

// Policies lists every policy, in report order.
var Policies = []string{PolicyUpstream, PolicyFirstFit, PolicyFFD, PolicyBestFit, PolicyFGD, PolicyDrasatBinpack, PolicyDrasat}

// isDrasat tells whether the policy runs drasat's engine.
func isDrasat(policy string) bool { return policy == PolicyDrasat || policy == PolicyDrasatBinpack }

// Config is one benchmark run.
type Config struct {
	Scenarios []string
	Sizes     map[string][]Size // per scenario; DefaultSizes when missing
	Seed      uint64
	Repeat    int // runs per policy; the median wall time is reported
	Policies  []string
	Timeout   time.Duration // drasat's budget per batch
	// MIGGPU is the GPU fleet of the mig scenario: a100 (default, also ""),
	// h100 or mixed.
	MIGGPU string
	// MIGFamilies are the claim mixes the mig scenario runs, each at every
	// size (MIGFamilies; none: default); MIGMix changes single settings of
	// each (ParseMIGMix).
	MIGFamilies []string
	// UseCBC lets drasat's aggregate stage call CBC on the batch scenarios
	// (alloc.Options.UseCBC).
	UseCBC bool
	MIGMix map[string]float64
	OpenB  OpenBConfig
	// Progress, when set, is called before each step and at the end.
	Progress func(done, total int, label string)
}

// Report is the outcome of a run. Apart from the times and memory, it is a
// function of the configuration.
type Report struct {
	Seed      uint64  `json:"seed"`
	Repeat    int     `json:"repeat"`
	TimeoutS  float64 `json:"timeoutSeconds"`
	Machine   Machine `json:"machine"`
	Rows      []*Row  `json:"rows"`
	MaxRSSMiB float64 `json:"maxRSSMiB"`
}

// Machine describes where the run happened.
type Machine struct {
	GOOS, GOARCH string
	CPUs         int
	GoVersion    string
}

// Row is one policy on one instance.
type Row struct {
	Scenario    string  `json:"scenario"`
	Instance    string  `json:"instance"`
	Size        Size    `json:"size"`
	Compat      string  `json:"compat"`
	Policy      string  `json:"policy"`
	Claims      int     `json:"claims"`
	Admitted    int     `json:"admitted"`
	AdmittedPct float64 `json:"admittedPct"`
	Devices     int     `json:"devices"`
	UnitName    string  `json:"unitName"`
	Units       int     `json:"units"`
	UnitsUsed   int     `json:"unitsUsed"`
	UnitsFree   int     `json:"unitsFree"`
	UtilName    string  `json:"utilName"`
	Util        float64 `json:"util"`
	// WallMs is the median over the repeats; WallsMs every repeat.
	WallMs      float64   `json:"wallMs"`
	WallsMs     []float64 `json:"wallsMs"`
	PeakHeapMiB float64   `json:"peakHeapMiB"`
	// drasat only.
	Optimal *bool    `json:"optimal,omitempty"`
	Bound   *int64   `json:"bound,omitempty"`
	Gap     *float64 `json:"gap,omitempty"`
	// FirstAnswer is drasat's first complete answer (its greedy
	// incumbent), ready FirstAnswerMs after the start: the build and the
	// stages up to greedy (untimed: they always run), summed over
	// components (first repeat).
	FirstAnswer   *int64  `json:"firstAnswer,omitempty"`
	FirstAnswerMs float64 `json:"firstAnswerMs,omitempty"`
	// Upstream only: the allocator implementation used.
	Implementation string `json:"implementation,omitempty"`
	// Picture: per-GPU memory slices, for small MIG instances.
	Picture []GPUPicture `json:"picture,omitempty"`
	// Replay: openb and openb-wait only.
	Replay *ReplayStats `json:"replay,omitempty"`
	// Research: the research report only (research.go).
	Research *ResearchStats `json:"research,omitempty"`
	// Inflation: the inflation simulation only.
	Inflation *InflationStats `json:"inflation,omitempty"`
	// allocated are the policy's new allocations (first repeat).
	allocated []*resourceapi.ResourceClaim
}

// InvalidError is a policy result the feasibility checker rejected.
type InvalidError struct {
	Policy, Instance string
	Err              error
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("INVALID ALLOCATION by %s on %s: %v", e.Policy, e.Instance, e.Err)
}

func (e *InvalidError) Unwrap() error { return e.Err }

// outcome is one policy's result on one batch.
type outcome struct {
	allocated []*resourceapi.ResourceClaim // the newly allocated claims
	stats     *alloc.Stats
	// prepared is the time before the policy's own work: the build and,
	// for best-fit, fgd and drasat, binding the look-ahead's measure.
	prepared time.Duration
	impl     string
	// reservation is the drasat policy's node reservation for the batch
	// (rv given to runPolicy).
	reservation reserve.Reservation
	// held names the claims the drasat policy held back for forecast
	// demand (lifecycle.holder); they stay pending.
	held map[string]bool
}

// lifecycle is what the drasat policy carries from batch to batch in the
// simulations over time.
type lifecycle struct {
	objective string            // alloc.Options.Objective ("": max-claims)
	reserver  *reserve.Reserver // nil: no reservation
	// cover: unadmitted tasks wait (openb-wait), so the look-ahead keeps
	// large nodes whole (frag.Measure.Cover).
	cover bool
	// upgrade: among the admitted sets of the proven size, the look-ahead
	// prefers one that allocates more (frag.Measure.Upgrade). On in
	// inflation, where nothing leaves and the unallocated share is the
	// measure; off in the replays, where it cost the dropping replay four
	// admissions of 321 on default A100 (docs/history/performance.md).
	upgrade bool
	now     time.Time // the batch's trace time
	// holder holds tasks back for forecast demand (OpenBConfig.Hold); the
	// replay observes arrivals into it.
	holder *hold.Holder
	// memo carries the model pieces of unchanged devices, pools and nodes
	// from one batch to the next (model.Memo), as in the controller; the
	// batches must then keep those objects (fgd-paper's windows).
	memo *model.Memo
	// noScarcity: the look-ahead's measure is FGD's alone
	// (frag.Measure.NoScarcity, an ablation).
	noScarcity bool
}

// runPolicy allocates the pending claims of objs with one policy and
// validates the result with the independent checker. wl is the workload the
// fragmentation-aware policies (fgd, drasat) measure against; nil means the
// batch's own pending claims. life, for the drasat policy in the
// simulations over time, gives the objective and the node reservation
// kept across batches; nil: the defaults, no reservation.
func runPolicy(ctx context.Context, policy string, objs *input.Objects, compat string, timeout time.Duration, wl *frag.Workload, useCBC bool, life *lifecycle) (*outcome, error) {
	out := &outcome{}
	switch policy {
	case PolicyUpstream:
		res, err := baseline.Upstream(ctx, objs, baseline.UpstreamFeaturesFor(objs))
		if err != nil {
			return nil, err
		}
		out.allocated, out.impl = res.Allocated, res.Implementation
	case PolicyFirstFit, PolicyFFD, PolicyBestFit, PolicyFGD, PolicyDrasatBinpack, PolicyDrasat:
		// Building the model (and the look-ahead's measure) counts against
		// drasat's budget, as in drasat allocate: the time reported is the
		// batch's, and a batch is decided within timeout.
		start := time.Now()
		var p *model.Problem
		var held *hold.Decision
		var err error
		if policy == PolicyDrasat && life != nil && life.holder != nil {
			// The batch with the holder's prototypes, and what it holds.
			p, held, err = holdBack(ctx, life, objs, compat)
		} else {
			opts := model.Options{Compat: compat}
			if life != nil {
				opts.Memo = life.memo
			}
			p, err = model.Build(ctx, objs, opts)
		}
		if err != nil {
			return nil, err
		}
		var m *frag.Measure
		if policy == PolicyBestFit || policy == PolicyFGD || policy == PolicyDrasat {
			if wl == nil {
				wl = frag.NewWorkload()
				for _, c := range objs.Claims {
					if c.Status.Allocation == nil {
						wl.Observe(c)
					}
				}
			}
			if m, err = wl.Bind(ctx, objs, p); err != nil {
				return nil, err
			}
		}
		out.prepared = time.Since(start)
		var res *alloc.Result
		switch policy {
		case PolicyFirstFit:
			res = baseline.FirstFit(p, p.Claims)
		case PolicyFFD:
			res = baseline.FirstFit(p, baseline.Decreasing(p))
		case PolicyBestFit:
			res = m.Greedy(p.Claims, frag.BestFit)
		case PolicyFGD:
			res = m.Greedy(p.Claims, frag.FGD)
		case PolicyDrasatBinpack:
			res, err = alloc.Run(ctx, p, alloc.Options{Timeout: alloc.TimeLeft(timeout, start), UseCBC: useCBC})
			if err != nil {
				return nil, err
			}
			out.stats = &res.Stats
		default:
			opts := alloc.Options{Policy: alloc.Frag, Lookahead: m, UseCBC: useCBC}
			if life != nil {
				opts.Objective = life.objective
				if life.reserver != nil {
					if out.reservation, err = life.reserver.Apply(ctx, objs, p, life.now); err != nil {
						return nil, err
					}
				}
				m.Cover = life.cover
				m.NoScarcity = life.noScarcity
				m.Upgrade = life.upgrade && life.objective != alloc.Ordered
			}
			opts.Timeout = alloc.TimeLeft(timeout, start)
			res, err = alloc.Run(ctx, p, opts)
			if err != nil {
				return nil, err
			}
			if held != nil {
				held.Drop(res)
				out.held = map[string]bool{}
				for i, c := range p.Claims {
					if held.IsHeld(i) {
						out.held[c.Obj.Name] = true
					}
				}
			}
			out.stats = &res.Stats
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			return nil, err
		}
		for _, c := range claims {
			if c.Status.Allocation != nil {
				out.allocated = append(out.allocated, c)
			}
		}
	default:
		return nil, fmt.Errorf("policy %q: want one of %s", policy, strings.Join(Policies, ", "))
	}
	return out, nil
}

// holdBack builds the batch with the holder's prototypes and decides which
// pending claims to hold; it returns the problem to solve (prototypes
// removed, held claims last) and the decision.
func holdBack(ctx context.Context, life *lifecycle, objs *input.Objects, compat string) (*model.Problem, *hold.Decision, error) {
	withProtos := *objs
	withProtos.Claims = append(slices.Clone(objs.Claims), life.holder.Prototypes()...)
	p, err := model.Build(ctx, &withProtos, model.Options{Compat: compat})
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(p.Claims))
	for i, c := range p.Claims {
		keys[i] = c.Obj.Name
	}
	d, err := life.holder.Decide(ctx, p, keys, life.now)
	if err != nil {
		return nil, nil, err
	}
	return d.Problem, d, nil
}

// validate runs the feasibility checker on a policy's result.
func validate(policy, instance string, objs *input.Objects, compat string, allocated []*resourceapi.ResourceClaim) error {
	if err := check.Check(objs, allocated, check.Options{Compat: compat}); err != nil {
		return &InvalidError{Policy: policy, Instance: instance, Err: err}
	}
	return nil
}

// MaxRepeat bounds the runs per policy and instance (--repeat).
const MaxRepeat = 100

// Run generates every instance and runs every policy on it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Repeat <= 0 {
		cfg.Repeat = 1
	}
	if cfg.Repeat > MaxRepeat {
		return nil, fmt.Errorf("repeat %d: more than %d runs per policy", cfg.Repeat, MaxRepeat)
	}
	if len(cfg.Policies) == 0 {
		cfg.Policies = Policies
	}
	for _, p := range cfg.Policies {
		if !contains(Policies, p) {
			return nil, fmt.Errorf("policy %q: want one of %s", p, strings.Join(Policies, ", "))
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if _, err := gen.MIGFleet(cfg.MIGGPU); err != nil {
		return nil, err
	}
	families := cfg.MIGFamilies
	if len(families) == 0 {
		families = []string{"default"}
	}
	for _, f := range families {
		mc, err := gen.MIGFamilyConfig(f, 1, 1, 1, 1)
		if err != nil {
			return nil, err
		}
		if err := gen.ApplyMIGMix(&mc, cfg.MIGMix); err != nil {
			return nil, err
		}
	}
	rep := &Report{Seed: cfg.Seed, Repeat: cfg.Repeat, TimeoutS: cfg.Timeout.Seconds(),
		Machine: Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}}
	type job struct {
		scenario string
		size     Size
		family   string
	}
	var jobs []job
	for _, sc := range cfg.Scenarios {
		if !contains(Scenarios, sc) {
			return nil, fmt.Errorf("scenario %q: want one of %s", sc, strings.Join(Scenarios, ", "))
		}
		sizes := cfg.Sizes[sc]
		if len(sizes) == 0 {
			var err error
			if sizes, err = ParseSizes(DefaultSizes[sc]); err != nil {
				return nil, err
			}
		}
		for _, sz := range sizes {
			if err := CheckSize(sc, sz, GenerateOptions{MIGGPU: cfg.MIGGPU}); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", sc, err)
			}
			if sc != "mig" {
				jobs = append(jobs, job{sc, sz, ""})
				continue
			}
			for _, f := range families {
				jobs = append(jobs, job{sc, sz, f})
			}
		}
	}
	steps := 0
	for _, j := range jobs {
		n := len(cfg.Policies)
		if j.scenario == "modes" {
			n *= 2
		}
		if j.scenario == "research" || j.scenario == "research-openb" {
			n = researchSteps(cfg)
		}
		steps += n
	}
	done := 0
	progress := func(label string) {
		if cfg.Progress != nil {
			cfg.Progress(done, steps, label)
		}
	}
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if j.scenario == "research" || j.scenario == "research-openb" { // research.go, research_openb.go
			run := RunResearch
			if j.scenario == "research-openb" {
				run = RunResearchOpenB
			}
			rows, err := run(ctx, cfg, j.size, func(label string) { progress(label); done++ }) // shown, then counted
			if err != nil {
				return nil, err
			}
			rep.Rows = append(rep.Rows, rows...)
			continue
		}
		if j.scenario == "openb" || j.scenario == "openb-wait" || j.scenario == "inflation" {
			for _, pol := range cfg.Policies {
				label := fmt.Sprintf("%s %s %s", j.scenario, j.size, pol)
				progress(label)
				var row *Row
				var err error
				switch j.scenario {
				case "inflation":
					oc := cfg.OpenB
					oc.Step = func(note string) { progress(label + " " + note) }
					row, err = RunInflation(ctx, oc, j.size, cfg.Seed, pol, cfg.Timeout)
				case "openb-wait":
					oc := cfg.OpenB
					oc.Wait = true
					row, err = RunOpenB(ctx, oc, j.size, cfg.Seed, pol, cfg.Timeout)
				default:
					oc := cfg.OpenB
					oc.Wait = false
					row, err = RunOpenB(ctx, oc, j.size, cfg.Seed, pol, cfg.Timeout)
				}
				if err != nil {
					return nil, err
				}
				rep.Rows = append(rep.Rows, row)
				done++
			}
			continue
		}
		insts, err := Generate(j.scenario, j.size, cfg.Seed, GenerateOptions{MIGGPU: cfg.MIGGPU, MIGFamily: j.family, MIGMix: cfg.MIGMix})
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			w := newWorld(in.Objs)
			for _, pol := range cfg.Policies {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				progress(in.Name() + " " + pol)
				row, err := runRow(ctx, in, w, pol, cfg)
				if err != nil {
					return nil, err
				}
				rep.Rows = append(rep.Rows, row)
				done++
			}
		}
	}
	progress("done")
	rep.MaxRSSMiB = maxRSSMiB()
	return rep, nil
}

func runRow(ctx context.Context, in *Instance, w *world, pol string, cfg Config) (*Row, error) {
	var first *outcome
	var walls []float64
	var peak uint64
	for r := 0; r < cfg.Repeat; r++ {
		h := startHeapSampler()
		start := time.Now()
		out, err := runPolicy(ctx, pol, in.Objs, in.Compat, cfg.Timeout, nil, cfg.UseCBC, nil)
		wall := time.Since(start)
		pk := h.Peak()
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", pol, in.Name(), err)
		}
		if err := validate(pol, in.Name(), in.Objs, in.Compat, out.allocated); err != nil {
			return nil, err
		}
		walls = append(walls, float64(wall.Microseconds())/1000)
		if pk > peak {
			peak = pk
		}
		if first == nil {
			first = out
		}
	}
	pending := 0
	for _, c := range in.Objs.Claims {
		if c.Status.Allocation == nil {
			pending++
		}
	}
	u := w.usage(in, first.allocated)
	row := &Row{Scenario: in.Scenario, Instance: in.Name(), Size: in.Size, Compat: in.Compat, Policy: pol,
		Claims: pending, Admitted: len(first.allocated), Devices: u.Devices,
		UnitName: in.UnitName, Units: u.Units, UnitsUsed: u.UnitsUsed, UnitsFree: u.UnitsFree,
		UtilName: in.UtilName, Util: u.Util, WallMs: median(walls), WallsMs: walls,
		PeakHeapMiB: float64(peak) / (1 << 20), Implementation: first.impl, allocated: first.allocated}
	if pending > 0 {
		row.AdmittedPct = 100 * float64(row.Admitted) / float64(pending)
	}
	if st := first.stats; st != nil {
		opt, bound, gap := st.Optimal, st.Bound, st.Gap()
		row.Optimal, row.Bound, row.Gap = &opt, &bound, &gap
		greedy := st.Greedy
		row.FirstAnswer = &greedy
		row.FirstAnswerMs = float64((first.prepared + st.UntilGreedy()).Microseconds()) / 1000
	}
	if in.Picture {
		row.Picture = w.pictures(in.Objs, first.allocated, in.namedFleet())
	}
	return row, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// maxRSSMiB is the process's peak resident set size (getrusage).
func maxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux: KiB
}
