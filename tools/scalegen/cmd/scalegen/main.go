// Command scalegen writes a generated A100 MIG cluster (package scalegen)
// as YAML for drasat allocate:
//
//	go run ./tools/scalegen/cmd/scalegen -nodes 1000 -gpus 8 -claims 30000 -seed 1 > c1000.yaml
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
	flag.Parse()
	if err := scalegen.WriteYAML(os.Stdout, scalegen.Generate(cfg)); err != nil {
		fmt.Fprintln(os.Stderr, "scalegen:", err)
		os.Exit(1)
	}
}
