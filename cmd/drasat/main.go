// Command drasat computes optimal allocations for Kubernetes DRA claims.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	app := &cli.App{
		Name:    "drasat",
		Version: version,
		Usage:   "optimal device allocation for Kubernetes Dynamic Resource Allocation",
		Commands: []*cli.Command{
			allocateCommand(),
			benchCommand(),
			controllerCommand(),
			reconcileCommand(),
			validateCommand(),
			explainCommand(),
			exportCommand(),
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "drasat:", err)
		os.Exit(1)
	}
}
