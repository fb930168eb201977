package acpsubagent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/demoagent"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// testAgent is the path of the scripted agent (internal/testagent), built once.
var testAgent string

func TestMain(m *testing.M) {
	// The test binary doubles as acpflow for `builtin: demo`: the kind
	// spawns os.Executable() with "agent demo".
	if len(os.Args) == 3 && os.Args[1] == "agent" && os.Args[2] == "demo" {
		if err := demoagent.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "acpflow-testagent-")
	if err != nil {
		panic(err)
	}
	testAgent = filepath.Join(dir, "testagent")
	if err := record.Build(testAgent); err != nil {
		panic("building the test agent: " + err.Error())
	}
	if err := procgroup.EnableSubreaper(); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// events collects what a step emitted, and what it reported of its
// processes (it is the invocation's steps.Processes too).
type events struct {
	mu    sync.Mutex
	all   []steps.Event
	procs []procCall
	// order is every event's type (a step update's kind) and every process
	// call ("process started", …), as they came.
	order []string
	// startErr is what Started returns: a record that cannot be written.
	startErr error
}

// procCall is one call of steps.Processes.
type procCall struct {
	call                       string // started, seen, ended
	agentPID, pid, descendants int
	startTicks                 uint64
}

func (e *events) Emit(ev steps.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	name := ev.Kind()
	if name == "" {
		name = ev.Type()
	}
	e.order = append(e.order, name)
	e.mu.Unlock()
}

func (e *events) process(c procCall) {
	e.mu.Lock()
	e.procs = append(e.procs, c)
	e.order = append(e.order, "process "+c.call)
	e.mu.Unlock()
}

func (e *events) Started(pid int, startTicks uint64) error {
	e.process(procCall{call: "started", pid: pid, startTicks: startTicks})
	return e.startErr
}

func (e *events) Seen(agentPID, pid int, startTicks uint64) {
	e.process(procCall{call: "seen", agentPID: agentPID, pid: pid, startTicks: startTicks})
}

func (e *events) Ended(pid, descendants int) {
	e.process(procCall{call: "ended", pid: pid, descendants: descendants})
}

// kinds lists the kinds of the step updates emitted, in order.
func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		if k := ev.Kind(); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// harness runs one acp-subagent step against the scripted agent.
type harness struct {
	t         *testing.T
	workspace string
	record    string
	agent     *steps.Agent
	with      map[string]any
	ambient   map[string]string
	perm      policies.Permission
	env       policies.Env
	events    *events
	// lingering, when set, receives the agent's teardown as the engine's
	// does; run waits for it before checking that nothing is left.
	lingering *sync.WaitGroup
	// settled is when Run returned, teardown may still be running;
	// eventsAtSettle how many events had been emitted then.
	settled        time.Time
	eventsAtSettle int
}

func newHarness(t *testing.T, agentFlags ...string) *harness {
	t.Helper()
	ws := t.TempDir()
	h := &harness{
		t:         t,
		workspace: ws,
		record:    filepath.Join(t.TempDir(), "record.jsonl"),
		with:      map[string]any{"agent": "test", "prompt": "do the thing"},
		ambient:   map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")},
		events:    &events{},
	}
	h.agent = steps.NewAgent("test")
	h.agent.Command = testAgent
	h.agent.Args = append([]string{"-record", h.record}, agentFlags...)
	h.agent.EOFGrace = 2 * time.Second
	h.agent.TermGrace = 2 * time.Second
	h.agent.StartTimeout = 10 * time.Second
	return h
}

func (h *harness) run(ctx context.Context) steps.Result {
	h.t.Helper()
	k := &Kind{Self: os.Args[0], SelfArgs: []string{"agent"}}
	if self, err := os.Executable(); err == nil {
		k.Self = self
	}
	st, err := k.Prepare(steps.StepConfig{ID: "s1", With: h.with, Agents: map[string]*steps.Agent{h.agent.Name: h.agent}})
	if err != nil {
		h.t.Fatalf("Prepare: %v", err)
	}
	perm, env := h.perm, h.env
	if perm == nil {
		perm = policies.DefaultPermission()
	}
	if env == nil {
		env = policies.DefaultEnv()
	}
	res := st.Run(ctx, &steps.Invocation{
		Workflow: "wf", RunID: "run-1", StepID: "s1", Attempt: 1, Workspace: h.workspace,
		With: h.with, Ambient: h.ambient,
		Permission: perm, PermissionSource: policies.SourceWorkflow,
		Env: env, EnvSource: policies.SourceWorkflow,
		Events: h.events, Processes: h.events, Lingering: h.lingering,
	})
	h.settled = time.Now()
	h.events.mu.Lock()
	h.eventsAtSettle = len(h.events.all)
	h.events.mu.Unlock()
	if h.lingering != nil {
		h.lingering.Wait()
	}
	h.assertNothingLeft()
	return res
}

// records returns the agent's recorded events.
func (h *harness) records() []map[string]any { return record.Read(h.record) }

func (h *harness) recorded(event string) []map[string]any { return record.Named(h.record, event) }

// assertNothingLeft proves that the agent and every process it started are
// gone: the agent's group, and each grandchild it recorded.
func (h *harness) assertNothingLeft() {
	h.t.Helper()
	record.AssertGone(h.t, h.record)
}
