package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write an allocation problem as a MIP (CPLEX LP format) for an exact solver, or a generated instance as objects",
		Description: `The problem comes from files (-f, as for allocate) or from a bench generator
(--scenario, --size, --seed and the mig flags, as for bench). --lp writes the
program of all pending claims: maximise the admitted claim weight under the
semantics drasat allocates by (docs/encoding.md); solve it with, for example,
  cbc model.lp sec 60 threads 1 solve solu solution.txt
  highs model.lp
--aggregate-lp writes the much smaller aggregated model (integer GPUs per claim
pattern, docs/encoding.md §3), whose optimum bounds the admitted claims.
--objects writes the objects of a generated instance as YAML, so that
drasat allocate -f FILE runs the same instance.`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "filename", Aliases: []string{"f"}, Usage: "file, directory or - (stdin) with the objects"},
			&cli.StringFlag{Name: "scenario", Aliases: []string{"s"}, Usage: "generate the instance instead: " + strings.Join(bench.Scenarios[:3], ", ")},
			&cli.StringFlag{Name: "size", Usage: "size of the generated instance (NODESxGPUS:CLAIMS or NODES:CLAIMS)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed"},
			&cli.StringFlag{Name: "mig-gpu", Value: "a100", Usage: "GPU fleet of the mig scenario: " + strings.Join(gen.MIGFleets, ", ")},
			&cli.StringFlag{Name: "mig-family", Value: "default", Usage: "claim mix of the mig scenario: " + strings.Join(gen.MIGFamilies, ", ")},
			&cli.StringFlag{Name: "mig-mix", Usage: "single settings of the mig claim mix, KEY=VALUE[,KEY=VALUE] (see drasat bench --help)"},
			&cli.StringFlag{Name: "compat", Value: model.CompatKEP5963, Usage: "compatibility-group semantics: kep5963 or wildcard"},
			&cli.StringFlag{Name: "lp", Usage: "write the MIP in CPLEX LP format to this file (- for stdout)"},
			&cli.StringFlag{Name: "objects", Usage: "write the objects as YAML to this file (- for stdout)"},
			&cli.StringFlag{Name: "node-aggregate-lp", Usage: "write the aggregated model with one copy per node (claims keep their node; a tighter bound) in CPLEX LP format to this file (- for stdout)"},
			&cli.StringFlag{Name: "aggregate-lp", Usage: "write the aggregated claim-pattern model (an integer program whose optimum bounds the admitted claims, max-claims weights) in CPLEX LP format to this file (- for stdout)"},
		},
		Action: runExport,
	}
}

func runExport(c *cli.Context) error {
	if c.String("lp") == "" && c.String("objects") == "" && c.String("aggregate-lp") == "" && c.String("node-aggregate-lp") == "" {
		return fmt.Errorf("nothing to write: give --lp FILE, --aggregate-lp FILE or --objects FILE")
	}
	objs, err := exportObjects(c)
	if err != nil {
		return err
	}
	if path := c.String("objects"); path != "" {
		var buf bytes.Buffer
		if err := writeObjects(&buf, objs); err != nil {
			return err
		}
		if err := writeOutput(path, buf.Bytes()); err != nil {
			return err
		}
	}
	if c.String("lp") == "" && c.String("aggregate-lp") == "" && c.String("node-aggregate-lp") == "" {
		return nil
	}
	if err := input.CheckLimits(objs); err != nil {
		return err
	}
	p, err := model.Build(c.Context, objs, model.Options{Compat: c.String("compat")})
	if err != nil {
		return err
	}
	for _, is := range p.Issues {
		fmt.Fprintln(os.Stderr, "warning:", is)
	}
	// The aggregated models: one over the whole cluster, one per node.
	for _, agg := range []struct {
		flag, what string
		write      func(*bound.Relaxation, io.Writer) (bound.AggregateStats, error)
	}{
		{"aggregate-lp", "the aggregated model", (*bound.Relaxation).WriteAggregateLP},
		{"node-aggregate-lp", "the aggregated model per node", (*bound.Relaxation).WriteNodeAggregateLP},
	} {
		path := c.String(agg.flag)
		if path == "" {
			continue
		}
		var buf bytes.Buffer
		rel, err := bound.New(c.Context, p, p.Claims, func(c *model.Claim) int64 { return c.Weight })
		if err != nil {
			return err
		}
		st, err := agg.write(rel, &buf)
		if err != nil {
			return fmt.Errorf("flag --%s: %w", agg.flag, err)
		}
		if err := writeOutput(path, buf.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s: %d bin types, %d item shapes, %d patterns\n", agg.what, st.Types, st.Shapes, st.Patterns)
	}
	if path := c.String("lp"); path != "" {
		var buf bytes.Buffer
		prog, err := mip.WriteLP(&buf, p)
		if err != nil {
			return err
		}
		if err := writeOutput(path, buf.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %d variables, %d constraints for %d pending claims\n", len(prog.Vars), prog.Rows, len(p.Claims))
	}
	return nil
}

// exportObjects loads the files or generates the instance.
func exportObjects(c *cli.Context) (*input.Objects, error) {
	files, scenario := c.StringSlice("filename"), c.String("scenario")
	switch {
	case len(files) > 0 && scenario != "":
		return nil, fmt.Errorf("flags -f and --scenario: give one of them")
	case len(files) > 0:
		objs, warnings, err := loadObjects(c.Context, c)
		for _, w := range warnings {
			fmt.Fprintln(os.Stderr, "warning:", w)
		}
		return objs, err
	case scenario == "":
		return nil, fmt.Errorf("no problem: give -f FILES or --scenario")
	case scenario == "openb":
		return nil, fmt.Errorf("flag --scenario: openb is a replay of many batches; export one of mig, tpu, modes")
	}
	sz, err := bench.ParseSize(c.String("size"))
	if err != nil {
		return nil, fmt.Errorf("flag --size: %w", err)
	}
	opts := bench.GenerateOptions{MIGGPU: strings.ToLower(c.String("mig-gpu")), MIGFamily: strings.ToLower(c.String("mig-family"))}
	if _, err := gen.MIGFleet(opts.MIGGPU); err != nil {
		return nil, fmt.Errorf("flag --mig-gpu: %w", err)
	}
	if _, err := gen.MIGFamilyConfig(opts.MIGFamily, 1, 1, 1, 1); err != nil {
		return nil, fmt.Errorf("flag --mig-family: %w", err)
	}
	if s := c.String("mig-mix"); s != "" {
		if opts.MIGMix, err = gen.ParseMIGMix(s); err != nil {
			return nil, fmt.Errorf("flag --mig-mix: %w", err)
		}
	}
	insts, err := bench.Generate(scenario, sz, c.Uint64("seed"), opts)
	if err != nil {
		return nil, fmt.Errorf("flag --scenario: %w", err)
	}
	return insts[0].Objs, nil
}

// writeObjects writes every object as a YAML document, with its kind.
func writeObjects(buf *bytes.Buffer, objs *input.Objects) error {
	if len(objs.CompatibleOnlyWith) > 0 {
		return fmt.Errorf("objects: devices with compatibleOnlyWith cannot be written back")
	}
	var docs []runtime.Object
	// Objects decoded from files carry no apiVersion/kind; a copy with
	// them set is written, the input is left untouched.
	add := func(o runtime.Object, gvk schema.GroupVersionKind) {
		o = o.DeepCopyObject()
		o.GetObjectKind().SetGroupVersionKind(gvk)
		docs = append(docs, o)
	}
	for _, n := range objs.Nodes {
		add(n, corev1.SchemeGroupVersion.WithKind("Node"))
	}
	for _, cl := range objs.Classes {
		add(cl, resourceapi.SchemeGroupVersion.WithKind("DeviceClass"))
	}
	for _, s := range objs.Slices {
		add(s, resourceapi.SchemeGroupVersion.WithKind("ResourceSlice"))
	}
	for _, cl := range objs.Claims {
		add(cl, resourceapi.SchemeGroupVersion.WithKind("ResourceClaim"))
	}
	for _, p := range objs.Pods {
		add(p, corev1.SchemeGroupVersion.WithKind("Pod"))
	}
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

// writeOutput writes to stdout for "-", else atomically to the file.
func writeOutput(path string, b []byte) error {
	if path == "-" {
		_, err := os.Stdout.Write(b)
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
