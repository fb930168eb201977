// Command acpflow-sandbox is the launcher a sandboxed agent is started
// through (docs/sandbox.md): installed beside acpflow, acpflow uses it
// instead of re-executing itself. It links the sandbox package alone, so
// it starts in a fraction of the time acpflow's own executable does, and
// its start is most of what confining a spawn costs. It is not meant to be
// run by hand: its arguments are a spec only acpflow writes.
package main

import (
	"os"

	"github.com/acpflow/acpflow/internal/sandbox"
)

func main() { os.Exit(sandbox.Main(os.Args[1:])) }
