package steps

import (
	"fmt"
	"math"
	"time"
)

// maxGrace is the seed's upper bound on a grace period (2147483647 ms, the
// largest timer Node accepts); kept so a workflow moved from the seed means
// the same thing here.
const maxGrace = time.Duration(math.MaxInt32) * time.Millisecond

// Check validates an agent's static configuration, the seed's config checks
// included: each grace finite, > 0 and ≤ 2147483647 ms; an empty cwd is an
// error (omit the key to use the workspace).
func (a *Agent) Check() error {
	switch {
	case a.Builtin != "" && a.Command != "":
		return fmt.Errorf("agent %s: set builtin or command, not both", a.Name)
	case a.Builtin == "" && a.Command == "":
		return fmt.Errorf("agent %s: needs a command (or builtin: demo, or a preset)", a.Name)
	case a.Builtin != "" && a.Builtin != "demo":
		return fmt.Errorf("agent %s: unknown builtin %q (known: demo)", a.Name, a.Builtin)
	}
	for _, g := range []struct {
		name string
		d    time.Duration
	}{{"start-timeout", a.StartTimeout}, {"dispose.eof-grace", a.EOFGrace}, {"dispose.term-grace", a.TermGrace}} {
		if g.d <= 0 {
			return fmt.Errorf("agent %s: %s must be greater than 0, got %s", a.Name, g.name, g.d)
		}
		if g.d > maxGrace {
			return fmt.Errorf("agent %s: %s must be at most 2147483647ms, got %s", a.Name, g.name, g.d)
		}
	}
	if a.CwdSet && a.Cwd == "" {
		return fmt.Errorf("agent %s: cwd is empty; omit the key to use the workspace", a.Name)
	}
	return nil
}

// NewAgent returns an agent with the default timings, for a loader to
// fill in from the keys the file sets.
func NewAgent(name string) *Agent {
	return &Agent{Name: name, StartTimeout: DefaultStartTimeout, EOFGrace: DefaultEOFGrace, TermGrace: DefaultTermGrace}
}
