// Command scalegen writes a generated A100 MIG cluster (package scalegen)
// as YAML for drasat allocate:
//
//	go run ./tools/scalegen/cmd/scalegen -nodes 1000 -gpus 8 -claims 30000 -seed 1 > c1000.yaml
//	go run ./tools/scalegen/cmd/scalegen -nodes 16 -claims 1000 -pod-cpus 48 > pods16.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/drasat/drasat/tools/scalegen"
)

func main() {
	var cfg scalegen.Config
	flag.IntVar(&cfg.Nodes, "nodes", 128, "nodes")
	flag.IntVar(&cfg.GPUs, "gpus", 8, "A100-40GB GPUs per node")
	flag.IntVar(&cfg.Claims, "claims", 4000, "pending claims")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	podCPUs := flag.Int("pod-cpus", 0, "give every node this many CPUs (6Gi of memory each, 110 pods, zones, a tainted and a cordoned node) and every claim a pod (scalegen.AddPods); 0: no pods")
	flag.Parse()
	objs := scalegen.Generate(cfg)
	if *podCPUs > 0 {
		scalegen.AddPods(objs, *podCPUs, cfg.Seed)
	}
	if err := scalegen.WriteYAML(os.Stdout, objs); err != nil {
		fmt.Fprintln(os.Stderr, "scalegen:", err)
		os.Exit(1)
	}
}
