// Package builtin serves acpflow's builtin agents (builtin: demo and
// builtin: replay) from a program other than acpflow: a builtin agent is
// the running executable started again as `PROGRAM agent demo`, so a
// worker binary (and a test binary) must answer to it as acpflow does.
package builtin

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpflow/acpflow/internal/demoagent"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps/confine"
)

// Serve runs the builtin agent args ask for ("agent demo", "agent replay
// FILE STEP") on stdio, and says whether args asked for one and the exit
// code.
func Serve(args []string) (served bool, code int) {
	// A sandboxed agent is started through this executable, as the
	// launcher that confines it, as acpflow's (docs/sandbox.md).
	if len(args) > 0 && args[0] == confine.Subcommand {
		return true, sandbox.Main(args[1:])
	}
	if len(args) < 2 || args[0] != "agent" {
		return false, 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch {
	case args[1] == "demo" && len(args) == 2:
		err = demoagent.Serve(ctx, os.Stdin, os.Stdout)
	case args[1] == "replay" && len(args) == 4:
		rec, lerr := replayagent.Load(args[2], args[3])
		if lerr != nil {
			err = lerr
			break
		}
		err = replayagent.Serve(ctx, rec, os.Stdin, os.Stdout, os.Stderr)
	default:
		return false, 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return true, 1
	}
	return true, 0
}
