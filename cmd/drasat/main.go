// Command drasat computes optimal allocations for Kubernetes DRA claims.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp(os.Args, os.Stdout, os.Stderr).Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "drasat:", err)
		os.Exit(1)
	}
}

// newApp is the command line. Help asked for (-h, --help, help) goes to
// stdout; help shown for a usage error (unknown command, flag or argument,
// missing flag) goes to stderr, and the command fails (exit 1).
func newApp(args []string, stdout, stderr io.Writer) *cli.App {
	help := stderr
	if len(args) > 0 && helpAsked(args[1:]) {
		help = stdout
	}
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
		Writer:    help,
		ErrWriter: stderr,
		// Reached without a known command: a usage error.
		Action: func(c *cli.Context) error {
			_ = cli.ShowAppHelp(c)
			if c.Args().Present() {
				return fmt.Errorf("unknown command %q", c.Args().First())
			}
			return errors.New("no command given")
		},
	}
	for _, cmd := range app.Commands {
		if cmd.ArgsUsage == " " { // takes no arguments
			cmd.Before = noArguments
		}
	}
	return app
}

// helpAsked tells whether the command line asks for help.
func helpAsked(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "--help" || a == "-help" || (i == 0 && a == "help") {
			return true
		}
	}
	return false
}

// noArguments refuses positional arguments, which a command taking none
// would otherwise ignore (`allocate file.yaml` without -f).
func noArguments(c *cli.Context) error {
	if c.Args().Present() {
		_ = cli.ShowSubcommandHelp(c)
		return fmt.Errorf("%s: unexpected argument %q (inputs are given with -f)", c.Command.Name, c.Args().First())
	}
	return nil
}
