// Package steps defines what a step kind is, and keeps the registry of the
// kinds a workflow's `uses:` may name.
//
// A kind has one lifecycle, written on the interface: the workflow loader
// decodes and checks its `with:` (Kind.Prepare, at validate time, before
// anything starts), and the engine runs the prepared step (Step.Run) once
// per attempt with the rendered values. Adding a kind touches one folder: it
// calls Register from its init function.
//
// The package is the contract every kind shares. One kind's own vocabulary
// lives with that kind: acp-subagent's presets, the decoding of its
// agents' values and its step updates are package acpagent's
// (steps/acpsubagent/acpagent).
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
)

// Kind makes steps of one `uses:` value.
type Kind interface {
	// Name is the `uses:` value, e.g. "acp-subagent".
	Name() string
	// Keys are the keys `with:` accepts, for strict decoding and "did you mean".
	Keys() []string
	// Required are the keys `with:` must have.
	Required() []string
	// Schema is the JSON schema (draft-07) of the kind's `with:` mapping,
	// for editors; `acpflow schema` composes it into the workflow file's
	// schema. Its properties and required keys are Keys and Required. It
	// may refer to the workflow schema's shared definitions
	// (#/definitions/scalar, size, duration, expression, name, id).
	Schema() json.RawMessage
	// Prepare checks a step's static configuration (agent exists, values
	// have the right shape) and returns the runnable step. with holds the
	// raw values, which may still contain ${{ }} templates. An error about
	// one value is a *FieldError, which the loader places on that value.
	Prepare(cfg StepConfig) (Step, error)
}

// StepConfig is a step as the workflow file declares it.
type StepConfig struct {
	ID     string
	With   map[string]any
	Agents map[string]*Agent
	// Dir is the workflow file's directory: what a relative path in the
	// step's static configuration (a schema file) is relative to.
	Dir string
}

// Step runs one attempt of one step.
type Step interface {
	// Run runs the step with its `with:` values rendered. It returns when
	// the step has settled; work that must finish before the run ends but
	// need not hold the step (an agent's teardown after its turn) goes to
	// inv.Linger. ctx ends when the step must stop (its timeout, or the
	// run being cancelled); the cause is context.Cause(ctx).
	Run(ctx context.Context, inv *Invocation) Result
}

// Invocation is one attempt of a step, with everything rendered.
type Invocation struct {
	Workflow  string
	RunID     string
	StepID    string
	Attempt   int
	Workspace string            // absolute
	With      map[string]any    // rendered `with:` values
	Ambient   map[string]string // acpflow's own environment, the env policy's input

	Permission       policies.Permission
	PermissionSource policies.Source
	Env              policies.Env
	EnvSource        policies.Source
	// Asker puts a request the permission policy decided to ask about to
	// a person; nil when there is no one (no terminal, --json, a batch),
	// and the policy's ask-fallback decides.
	Asker policies.Asker
	// Outer is the outer policy, which the step's policies decide within
	// (docs/policies.md#the-outer-policy); nil: none.
	Outer policies.Outer
	// Sandbox is the workflow's `sandbox:` (`run --sandbox` included): the
	// default of a step that names no agent and sets no with.sandbox
	// (an agent's already holds it); nil: none.
	Sandbox *Sandbox
	// StateFiles are acpflow's own files and directories that every
	// sandbox denies: the run store in use (with its -wal and -shm) and
	// acpflow's state directory. Nil: none known (a step run alone).
	StateFiles []string

	// Render expands the ${{ }} templates of a string in the step's scope,
	// for values a kind reads from outside `with:` (an agent's env).
	Render func(string) (string, error)

	Events Sink
	// Processes keeps the record of the processes the step starts, sees
	// and ends, for crash-reaping; nil keeps none. A kind reports through
	// the ProcessStarted, ProcessSeen and ProcessEnded methods.
	Processes Processes

	// Lingering holds work a step hands on past its settling (see Linger);
	// the engine waits for it before the run ends. Nil: Linger runs the
	// work at once.
	Lingering *sync.WaitGroup

	// Run is the run's scope and Batch the batch's (for a lone run, one of
	// its own): what a kind keeps between steps and between runs. Nil when
	// the step runs alone (a test): nothing is kept.
	Run, Batch *Scope
	// ContinuedBy lists the steps that continue this step's session (see
	// SessionStep): the kind keeps what they need alive for them.
	ContinuedBy []string
	// SessionOf is the session id an earlier step of the run recorded ("":
	// none), for continuing it where its agent is gone (after a resume).
	SessionOf func(step string) string
	// BudgetReached says why the run's (or its batch's) budget allows no
	// more spending, or nil: a model gateway asks it before each request
	// (docs/gateway.md). Nil: no budget.
	BudgetReached func() error
}

// SessionStep is a prepared step that holds a conversation with an agent,
// which a later step may continue (`session: STEP`) or branch (`fork`).
// The loader checks the references and the engine tells each step who
// continues it (Invocation.ContinuedBy).
type SessionStep interface {
	Step
	// AgentName is the agent the step talks to; a step continues only a
	// session of the same agent.
	AgentName() string
	// Continues is the step whose session this step continues ("" for a
	// new session) and whether it branches it instead.
	Continues() (step string, fork bool)
}

// Linger runs f in the background when the invocation has somewhere to
// wait for it, else at once: an agent's teardown must not hold the step
// that used it, nor outlive the run.
func (inv *Invocation) Linger(f func()) {
	if inv.Lingering == nil {
		f()
		return
	}
	inv.Lingering.Go(f)
}

// Processes is the run's record of the processes a step starts, sees and
// ends: what lets a later `acpflow resume` kill what a crashed acpflow left
// behind. A kind that spawns processes reports each one, and gets
// crash-reaping with no more; the run store's recorder (package runs)
// implements it.
//
// # Notes
//
// When Started returns nil the process is on record, so a kind reports a
// process before it announces it in an event, and before it drives it. An
// error means it could not be recorded: the kind stops the process and
// fails the step with it, since a process the record does not name could
// outlive a crash unseen. Seen and Ended may be recorded later.
type Processes interface {
	// Started: the step started process pid (start time startTicks, in
	// clock ticks since boot), leader of its own process group.
	Started(pid int, startTicks uint64) error
	// Seen: process pid was seen below agentPID, one the step started;
	// also one that left the group (setsid).
	Seen(agentPID, pid int, startTicks uint64)
	// Ended: process pid and its group are gone, and so are the
	// descendants processes seen below it.
	Ended(pid, descendants int)
}

// ProcessStarted reports a process the step started to inv.Processes, if
// any, and returns its error (see Processes).
func (inv *Invocation) ProcessStarted(pid int, startTicks uint64) error {
	if inv.Processes != nil {
		return inv.Processes.Started(pid, startTicks)
	}
	return nil
}

// ProcessSeen reports a process seen below one the step started.
func (inv *Invocation) ProcessSeen(agentPID, pid int, startTicks uint64) {
	if inv.Processes != nil {
		inv.Processes.Seen(agentPID, pid, startTicks)
	}
}

// ProcessEnded reports a process the step started gone, with its group
// and the descendants seen below it.
func (inv *Invocation) ProcessEnded(pid, descendants int) {
	if inv.Processes != nil {
		inv.Processes.Ended(pid, descendants)
	}
}

// StopReason is how a step's turn ended (docs/acp-subagent.md#the-turn).
type StopReason string

const (
	Completed StopReason = "completed"
	MaxTokens StopReason = "max-tokens"
	Refusal   StopReason = "refusal"
	Aborted   StopReason = "aborted"
	Error     StopReason = "error"
)

// Result is what one attempt produced.
type Result struct {
	StopReason StopReason
	// Output is every agent message, in order, a blank line between two
	// messages that other updates came between; Final is the last message
	// alone.
	Output string
	Final  string
	// JSON is the value a step with an output schema (StructuredStep)
	// produced: its final message parsed as JSON, matching the schema. Nil
	// for any other step, and for one whose answer did not match.
	JSON        any
	Err         error // nil only for a completed step
	SessionID   string
	Permissions []policies.PermissionRecord
	Stderr      string // the kept tail of the child's stderr
	// Usage is what the agent reported of the attempt's tokens and cost;
	// nil when it reported nothing.
	Usage *Usage
	// Sandbox is what the attempt's sandbox enforced; nil: it had none.
	Sandbox *SandboxRecord
	// ExitCode is how the command of a step that runs one (uses: shell)
	// exited: its exit status, or 128 + the signal that killed it, as a
	// shell's $? says. Nil for a step that runs no command, and for one
	// acpflow stopped (a timeout, a cancel) or could not start.
	ExitCode *int
	// Transcript is what the step and its agent said to each other, when
	// the kind keeps one; the engine fills in step, element and attempt.
	Transcript *transcript.Step
}

// Agent is a named agent of the workflow file (docs/workflow.md `agents:`).
type Agent struct {
	Name string
	// Kind is the step kind that decoded the agent (steps.AgentKind).
	Kind    string
	Builtin string // "demo" or "replay": acpflow's own agents
	// Preset is the preset the agent names ("" for none): the runner
	// reads what the preset knows of the agent beyond the keys it fills
	// in (its private files, session _meta, the modes in which it decides
	// alone, its old auth ids).
	Preset  string
	Command string   // looked up on PATH at run time
	Args    []string // may contain ${{ }}
	Env     map[string]string
	Cwd     string // relative to the workspace
	CwdSet  bool   // the file has a cwd key (an empty one is an error)
	Auth    string
	// From is what `builtin: replay` plays back: a transcript file (as
	// `acpflow export` writes), or a run id with an optional /STEP, which
	// acpflow run resolves into a file before the agent starts. A path
	// relative to the workflow file's directory is made absolute by the
	// loader. Only builtin replay takes it.
	From string
	// Mode is the ACP session mode set (session/set_mode) after session/new;
	// "" keeps the agent's own default. A step's `with.mode` replaces it.
	Mode string
	// Config holds ACP session config options (session/set_config_option),
	// option id → value id ("true"/"false" for a boolean option), e.g.
	// {model: …}. Values may contain ${{ }}. A step's `with.config` is
	// layered over it.
	Config map[string]string
	// MCPServers are given to the agent in session/new; a step's
	// `with.mcp-servers` adds to them, replacing one of the same name.
	MCPServers []MCPServer
	// MaxOutput is how many bytes of agent output a step keeps; past it the
	// step fails, keeping the first MaxOutput bytes. 0 means DefaultMaxOutput.
	MaxOutput int64
	// Sandbox is the agent's confinement (`sandbox:`, the workflow's when
	// the agent sets none; nil: none). A step's with.sandbox replaces it.
	Sandbox *Sandbox
	// SandboxSet says the file set sandbox: on the agent (false included),
	// so that neither the workflow's default nor `run --sandbox` replaces
	// it.
	SandboxSet bool
	// Gateway is the agent's model gateway (`gateway:`, the workflow's
	// when the agent sets none; nil: none): acpflow holds the provider
	// key and the agent is pointed at a local endpoint (docs/gateway.md).
	Gateway *Gateway
	// GatewaySet says the file set gateway: on the agent (false
	// included), so that the workflow's default does not replace it.
	GatewaySet bool
	// Reuse keeps the agent's processes alive between the steps and runs
	// (of a batch) that start it the same way (command, args, env, auth):
	// each step gets a session of its own on an idle one.
	Reuse        bool
	StartTimeout time.Duration
	EOFGrace     time.Duration
	// EOFIdle ends the EOF wait early once the agent's process group has
	// been idle this long (no CPU, nothing running), for an agent that is
	// known never to exit on EOF (`dispose.eof-idle`, or a preset's
	// measurement). 0, the default, waits up to the whole EOFGrace: an
	// agent that is idle while it waits to flush (a network write, a
	// timer) is not told from one that will never exit.
	EOFIdle   time.Duration
	TermGrace time.Duration
	// ShellAdvice says the user wrote no workflow file for this agent
	// (acpflow prompt wrote it): what a hint tells them to do is in shell
	// terms (`export ANTHROPIC_API_KEY=…`), not the file's (a key under
	// env:). Never read from a file.
	ShellAdvice bool
}

// Defaults of an agent's timings (docs/workflow.md, the seed's dispose graces).
const (
	DefaultStartTimeout = 60 * time.Second
	DefaultEOFGrace     = 6 * time.Second
	DefaultTermGrace    = 3 * time.Second
	// MinEOFIdle is the shortest dispose.eof-idle: idleness is judged
	// from CPU time, counted in clock ticks (10 ms).
	MinEOFIdle = 50 * time.Millisecond
	// DefaultMaxOutput bounds a step's output when neither the agent nor
	// the step sets max-output.
	DefaultMaxOutput = 8 << 20
)

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// Register makes a kind available to `uses:`. It panics on a duplicate
// name, which is a programming error found at start-up.
func Register(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[k.Name()]; dup {
		panic(fmt.Sprintf("steps: kind %q registered twice", k.Name()))
	}
	kinds[k.Name()] = k
}

// Lookup returns the kind registered under name.
func Lookup(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Names lists the registered kinds, sorted.
func Names() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]string, 0, len(kinds))
	for n := range kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
