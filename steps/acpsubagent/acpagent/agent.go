package acpagent

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// maxGrace is the seed's upper bound on a grace period (2147483647 ms, the
// largest timer Node accepts); kept so a workflow moved from the seed means
// the same thing here.
const maxGrace = time.Duration(math.MaxInt32) * time.Millisecond

// Check validates an agent's static configuration (the loader's, and
// any built in code), the seed's config checks
// included: each grace finite, > 0 and ≤ 2147483647 ms; an empty cwd is an
// error (omit the key to use the workspace). An error is a *FieldError
// whose path is the agent's key at fault (none: the agent as a whole).
func Check(a *steps.Agent) error {
	switch {
	case a.Builtin != "" && a.Command != "":
		return steps.FieldErrorf([]string{"command"}, "agent %s: set builtin or command, not both", a.Name)
	case a.Builtin == "" && a.Command == "":
		return steps.FieldErrorf(nil, "agent %s: needs a command (or builtin: demo, or a preset)", a.Name)
	case a.Builtin != "" && a.Builtin != "demo" && a.Builtin != "replay":
		return steps.FieldErrorf([]string{"builtin"}, "agent %s: unknown builtin %q (known: demo, replay)", a.Name, a.Builtin)
	case a.Builtin == "replay" && a.From == "":
		return steps.FieldErrorf([]string{"builtin"}, "agent %s: builtin replay needs from: a transcript file (acpflow export) or RUN[/STEP]", a.Name)
	case a.From != "" && a.Builtin != "replay":
		return steps.FieldErrorf([]string{"from"}, "agent %s: from is only for builtin: replay", a.Name)
	}
	for _, g := range []struct {
		path []string
		d    time.Duration
	}{{[]string{"start-timeout"}, a.StartTimeout}, {[]string{"dispose", "eof-grace"}, a.EOFGrace}, {[]string{"dispose", "term-grace"}, a.TermGrace}} {
		name := strings.Join(g.path, ".")
		if g.d <= 0 {
			return steps.FieldErrorf(g.path, "agent %s: %s must be greater than 0, got %s", a.Name, name, g.d)
		}
		if g.d > maxGrace {
			return steps.FieldErrorf(g.path, "agent %s: %s must be at most 2147483647ms, got %s", a.Name, name, g.d)
		}
	}
	if err := checkEOFIdle(a); err != nil {
		return err
	}
	if a.MaxOutput < 0 || a.MaxOutput > MaxSize {
		return steps.FieldErrorf([]string{"max-output"}, "agent %s: max-output must be greater than 0 and at most 1 GiB, got %d bytes", a.Name, a.MaxOutput)
	}
	for id := range a.Config {
		if id == "" {
			return steps.FieldErrorf([]string{"config"}, "agent %s: config: an option id is empty", a.Name)
		}
	}
	if a.CwdSet && a.Cwd == "" {
		return steps.FieldErrorf([]string{"cwd"}, "agent %s: cwd is empty; omit the key to use the workspace", a.Name)
	}
	if err := CheckMCPServers(a.MCPServers, []string{"mcp-servers"}); err != nil {
		var fe *steps.FieldError
		if errors.As(err, &fe) {
			return &steps.FieldError{Path: fe.Path, Err: fmt.Errorf("agent %s: %w", a.Name, fe.Err)}
		}
		return err
	}
	return nil
}

// checkEOFIdle checks dispose.eof-idle: 0 (off), or at least MinEOFIdle
// and shorter than the EOF grace it would cut.
func checkEOFIdle(a *steps.Agent) error {
	path := []string{"dispose", "eof-idle"}
	switch {
	case a.EOFIdle == 0:
		return nil
	case a.EOFIdle < steps.MinEOFIdle:
		return steps.FieldErrorf(path, "agent %s: dispose.eof-idle must be 0 (wait the whole eof-grace) or at least %s, got %s", a.Name, steps.MinEOFIdle, a.EOFIdle)
	case a.EOFIdle >= a.EOFGrace:
		return steps.FieldErrorf(path, "agent %s: dispose.eof-idle (%s) must be shorter than dispose.eof-grace (%s), or it never ends the wait", a.Name, a.EOFIdle, a.EOFGrace)
	}
	return nil
}
