package shell

import "github.com/acpflow/acpflow/policies"

// A shell step's step_update events (docs/shell.md#events). They carry the
// same kinds, and members of the same names, as an agent step's where they
// say the same thing (env, spawned, descendant, teardown), so that a
// reader of `--json` follows either kind of step alike.

// Env is the env policy's decision for the command, by name count only.
type Env struct {
	Policy       string                  `json:"policy"`
	Rule         string                  `json:"rule"`
	Names        int                     `json:"names"`
	PolicyStderr string                  `json:"policy_stderr,omitempty"`
	Outer        []policies.OuterEnvRule `json:"outer,omitempty"`
}

// Spawned is the shell started, leader of its own process group.
type Spawned struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	Cwd        string `json:"cwd"`
	Shell      string `json:"shell"` // the program that runs the command line
}

// Descendant is a process seen below the shell (its commands, and any that
// left the group).
type Descendant struct {
	AgentPID   int    `json:"agent_pid"` // the shell's: the member name agent steps use
	PID        int    `json:"pid"`
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"`
}

// Stdout is a piece of the command's standard output, as it was read.
type Stdout struct {
	Text string `json:"text"`
}

// Exited is the shell itself ending: its exit code, or the signal that
// killed it (then the code is 128 + the signal, as $? says).
type Exited struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
}

// Teardown is how the shell's process group ended (as an agent's).
type Teardown struct {
	PID           int    `json:"pid"`
	Tier          string `json:"tier"`
	Exit          string `json:"exit"`
	DurationMS    int64  `json:"duration_ms"`
	EscapedKilled int    `json:"escaped_killed,omitempty"`
	Descendants   int    `json:"descendants,omitempty"`
	Error         string `json:"error,omitempty"`
}

func (Env) EventType() string        { return "step_update" }
func (Spawned) EventType() string    { return "step_update" }
func (Descendant) EventType() string { return "step_update" }
func (Stdout) EventType() string     { return "step_update" }
func (Exited) EventType() string     { return "step_update" }
func (Teardown) EventType() string   { return "step_update" }

func (Env) UpdateKind() string        { return "env" }
func (Spawned) UpdateKind() string    { return "spawned" }
func (Descendant) UpdateKind() string { return "descendant" }
func (Stdout) UpdateKind() string     { return "stdout" }
func (Exited) UpdateKind() string     { return "exited" }
func (Teardown) UpdateKind() string   { return "teardown" }
