// Command scalegen writes a generated A100 MIG cluster (package scalegen)
// as YAML for drasat allocate:
//
//	go run ./tools/scalegen/cmd/scalegen -nodes 1000 -gpus 8 -claims 30000 -seed 1 > c1000.yaml
//	go run ./tools/scalegen/cmd/scalegen -family rich -nodes 16 -claims 1000 > rich16.yaml
//	go run ./tools/scalegen/cmd/scalegen -nodes 16 -claims 1000 -pod-cpus 48 > pods16.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/drasat/drasat/tools/scalegen"
)

func main() {
	var cfg scalegen.Config
	flag.IntVar(&cfg.Nodes, "nodes", 128, "nodes")
	flag.IntVar(&cfg.GPUs, "gpus", 8, "GPUs per node (A100-40GB; rich: the node's model)")
	flag.IntVar(&cfg.Claims, "claims", 4000, "pending claims")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	flag.StringVar(&cfg.Family, "family", "default", "claim mix: "+strings.Join(scalegen.Families, ", ")+" (rich: firstAvailable, several devices on one GPU, count 2, distinctAttribute, CEL on capacity and productName, on A100-40GB, A100-80GB and H100 nodes)")
	podCPUs := flag.Int("pod-cpus", 0, "give every node this many CPUs (6Gi of memory each, 110 pods, zones, a tainted and a cordoned node) and every claim a pod (scalegen.AddPods); 0: no pods")
	flag.Parse()
	if !slices.Contains(scalegen.Families, cfg.Family) {
		fmt.Fprintf(os.Stderr, "scalegen: -family %q: want one of %s\n", cfg.Family, strings.Join(scalegen.Families, ", "))
		os.Exit(2)
	}
	objs := scalegen.Generate(cfg)
	if *podCPUs > 0 {
		scalegen.AddPods(objs, *podCPUs, cfg.Seed)
	}
	if err := scalegen.WriteYAML(os.Stdout, objs); err != nil {
		fmt.Fprintln(os.Stderr, "scalegen:", err)
		os.Exit(1)
	}
}
