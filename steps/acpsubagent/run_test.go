package acpsubagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

func TestStopReasonsMapAsTheSeed(t *testing.T) {
	for _, tc := range []struct {
		agent string
		want  steps.StopReason
	}{
		{"end_turn", steps.Completed},
		{"max_tokens", steps.MaxTokens},
		{"refusal", steps.Refusal},
		{"cancelled", steps.Aborted},
		{"max_turn_requests", steps.Error},
		{"weird_reason", steps.Error},
	} {
		t.Run(tc.agent+" becomes "+string(tc.want), func(t *testing.T) {
			res := newHarness(t, "-stop", tc.agent).run(context.Background())
			if res.StopReason != tc.want {
				t.Errorf("stop reason = %q, want %q (err %v)", res.StopReason, tc.want, res.Err)
			}
			if (tc.want == steps.Completed) != (res.Err == nil) {
				t.Errorf("err = %v; only a completed step has no error", res.Err)
			}
			if tc.agent == "weird_reason" && !strings.Contains(res.Err.Error(), "weird_reason") {
				t.Errorf("the error does not name the unknown reason: %v", res.Err)
			}
		})
	}
}

func TestOutputIsTheChunksConcatenatedWithNothingBetween(t *testing.T) {
	res := newHarness(t, "-chunk", "a", "-chunk", "b ", "-chunk", "", "-chunk", "c\nd").run(context.Background())
	if res.Output != "ab c\nd" {
		t.Errorf("output = %q, want %q", res.Output, "ab c\nd")
	}
}

func TestThoughtsToolCallsAndOtherSessionsStayOutOfTheOutput(t *testing.T) {
	h := newHarness(t, "-noise", "-chunk", "one", "-chunk", "two")
	res := h.run(context.Background())
	// The noise between the two chunks (a thought, a tool call, a plan)
	// makes them two messages: a blank line between, the last one final.
	if res.Output != "one\n\ntwo" || res.Final != "two" {
		t.Errorf("output = %q, final = %q; want %q, %q", res.Output, res.Final, "one\n\ntwo", "two")
	}
	kinds := strings.Join(h.events.kinds(), ",")
	for _, k := range []string{"agent_thought_chunk", "tool_call", "tool_call_update", "plan", "current_mode_update"} {
		if !strings.Contains(kinds, k) {
			t.Errorf("event log lacks %s: %s", k, kinds)
		}
	}
}

func TestSessionIDIsTheAgentsAndRecorded(t *testing.T) {
	res := newHarness(t, "-session-id", "ta-fixed").run(context.Background())
	if res.SessionID != "ta-fixed" {
		t.Errorf("session id = %q", res.SessionID)
	}
}

func TestEnvAmbientSecretsAreGoneExplicitValuesArrive(t *testing.T) {
	h := newHarness(t)
	h.ambient["OPENAI_API_KEY"] = "sk-ambient"
	h.ambient["DATABASE_URL"] = "postgres://u:p@h/db"
	h.ambient["ACPFLOW_STATE"] = "/tmp/state.db"
	h.ambient["LANG"] = "C.UTF-8"
	h.agent.Env = map[string]string{"ANTHROPIC_API_KEY": "sk-explicit", "ACPFLOW_MODE": "agent"}
	h.with["env"] = map[string]any{"ACPFLOW_MODE": "step", "PLAN_MODE": "1"}
	res := h.run(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	env := h.recorded("start")[0]["env"].(map[string]any)
	for _, gone := range []string{"OPENAI_API_KEY", "DATABASE_URL", "ACPFLOW_STATE"} {
		if _, ok := env[gone]; ok {
			t.Errorf("ambient %s reached the agent", gone)
		}
	}
	for k, want := range map[string]string{"ANTHROPIC_API_KEY": "sk-explicit", "ACPFLOW_MODE": "step", "PLAN_MODE": "1", "LANG": "C.UTF-8"} {
		if env[k] != want {
			t.Errorf("%s = %v, want %q", k, env[k], want)
		}
	}
}

func TestCwdDefaultsToTheWorkspaceAndGoesToSessionNew(t *testing.T) {
	h := newHarness(t)
	if res := h.run(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	start, sess := h.recorded("start")[0], h.recorded("session_new")[0]
	if start["cwd"] != h.workspace {
		t.Errorf("process cwd = %v, want %s", start["cwd"], h.workspace)
	}
	if sess["params"].(map[string]any)["cwd"] != h.workspace {
		t.Errorf("session/new cwd = %v, want %s", sess["params"], h.workspace)
	}
}

func TestRelativeStepCwdIsResolvedAgainstTheWorkspace(t *testing.T) {
	h := newHarness(t)
	sub := filepath.Join(h.workspace, "sub", "dir")
	os.MkdirAll(sub, 0o755)
	h.with["cwd"] = "sub/dir"
	if res := h.run(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := h.recorded("start")[0]["cwd"]; got != sub {
		t.Errorf("process cwd = %v, want %s", got, sub)
	}
	if got := h.recorded("session_new")[0]["params"].(map[string]any)["cwd"]; got != sub {
		t.Errorf("session/new cwd = %v, want %s", got, sub)
	}
}

func TestBadCwdFailsTheStepBeforeAnythingIsSpawned(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(ws string) string
	}{
		{"a missing directory", "does not exist", func(ws string) string { return "missing" }},
		{"a file", "is not a directory", func(ws string) string {
			os.WriteFile(filepath.Join(ws, "file"), nil, 0o644)
			return "file"
		}},
	} {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			h := newHarness(t)
			h.with["cwd"] = tc.make(h.workspace)
			res := h.run(context.Background())
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) || !strings.Contains(res.Err.Error(), h.workspace) {
				t.Errorf("err = %v, want it to name the path and say %q", res.Err, tc.want)
			}
			if len(h.records()) != 0 {
				t.Errorf("the agent was spawned")
			}
		})
	}
}

func TestAbortBeforeStartSpawnsNothing(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := h.run(ctx)
	if res.StopReason != steps.Aborted || res.Err == nil || res.Err.Error() != "subagent request was aborted before the ACP child started" {
		t.Errorf("result = %q %v", res.StopReason, res.Err)
	}
	if len(h.records()) != 0 {
		t.Errorf("the agent was spawned")
	}
}

func TestAbortDuringSessionNewTearsDownAndSettlesAborted(t *testing.T) {
	h := newHarness(t, "-hang-on", "session/new")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, func() bool { return len(h.recorded("hang")) > 0 })
		cancel()
	}()
	res := h.run(ctx)
	if res.StopReason != steps.Aborted {
		t.Errorf("stop reason = %q (%v), want aborted", res.StopReason, res.Err)
	}
}

func TestCancelReachesTheAgentAsSessionCancel(t *testing.T) {
	h := newHarness(t, "-prompt-hang", "-chunk", "partial ")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		waitFor(t, func() bool { return len(h.recorded("prompt")) > 0 })
		cancel(errors.New("step timed out after 1s"))
	}()
	res := h.run(ctx)
	if res.StopReason != steps.Aborted {
		t.Errorf("stop reason = %q, want aborted", res.StopReason)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "step timed out") {
		t.Errorf("err = %v, want the cancel's cause", res.Err)
	}
	if len(h.recorded("cancel")) != 1 {
		t.Errorf("the agent did not receive session/cancel: %v", h.records())
	}
}

func TestAnAgentThatIgnoresCancelStillSettlesAbortedPromptly(t *testing.T) {
	h := newHarness(t, "-prompt-hang", "-ignore-cancel")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, func() bool { return len(h.recorded("prompt")) > 0 })
		cancel()
	}()
	// Graces of a minute: the step settles at once on the cancel and the
	// agent exits on EOF, so the run ends in seconds even on a loaded
	// machine; a step that waited for the agent's answer would never end,
	// one that waited out a grace would take a minute (a hang guard, not a
	// measurement).
	h.agent.EOFGrace, h.agent.TermGrace = time.Minute, time.Minute
	begin := time.Now()
	res := h.run(ctx)
	if res.StopReason != steps.Aborted {
		t.Errorf("stop reason = %q, want aborted", res.StopReason)
	}
	if d := time.Since(begin); d >= time.Minute {
		t.Errorf("took %s: a grace was waited out", d)
	}
}

func TestACrashIsAnErrorWithTheAgentsStderr(t *testing.T) {
	for _, method := range []string{"initialize", "session/new", "session/prompt"} {
		t.Run("during "+method, func(t *testing.T) {
			res := newHarness(t, "-crash-on", method).run(context.Background())
			if res.StopReason != steps.Error || res.Err == nil {
				t.Fatalf("result = %q %v", res.StopReason, res.Err)
			}
			msg := res.Err.Error()
			for _, want := range []string{method, "exit status 3", "crashing on " + method} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q:\n%s", want, msg)
				}
			}
		})
	}
}

func TestAChildThatDiesMidPromptKeepsItsPartialOutput(t *testing.T) {
	res := newHarness(t, "-exit-mid-prompt").run(context.Background())
	if res.StopReason != steps.Error || res.Output != "partial" {
		t.Errorf("result = %q %q %v", res.StopReason, res.Output, res.Err)
	}
}

func TestAMissingSessionIDIsTheSeedsError(t *testing.T) {
	res := newHarness(t, "-no-session-id").run(context.Background())
	if res.Err == nil || res.Err.Error() != "ACP child published without a session id" {
		t.Errorf("err = %v", res.Err)
	}
}

func TestAnAgentThatNeverAnswersInitializeHitsStartTimeout(t *testing.T) {
	h := newHarness(t, "-hang-on", "initialize")
	h.agent.StartTimeout = 300 * time.Millisecond
	// The error names the start-timeout, which alone ends an agent that
	// never answers: no time is asserted (spawn and teardown take what a
	// loaded machine gives them).
	res := h.run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "start-timeout") || !strings.Contains(res.Err.Error(), "initialize") {
		t.Errorf("err = %v", res.Err)
	}
}

func TestACommandNotOnPathFailsTheStep(t *testing.T) {
	h := newHarness(t)
	h.agent.Command = "no-such-agent-xyz"
	res := h.run(context.Background())
	if res.Err == nil || res.Err.Error() != `agents.test: command "no-such-agent-xyz" not found in PATH` {
		t.Errorf("err = %v", res.Err)
	}
}

func TestAuthRequiredFailsWithoutAuthAndPassesWithIt(t *testing.T) {
	res := newHarness(t, "-require-auth", "key-method").run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "Authentication required") {
		t.Errorf("without auth: err = %v", res.Err)
	}
	h := newHarness(t, "-require-auth", "key-method")
	h.agent.Auth = "key-method"
	if res := h.run(context.Background()); res.Err != nil {
		t.Errorf("with auth: %v", res.Err)
	}
}

func TestRequestsAcpflowDoesNotServeGetMethodNotFound(t *testing.T) {
	h := newHarness(t, "-ask-client", "fs/read_text_file", "-ask-client", "terminal/create", "-no-chunks")
	res := h.run(context.Background())
	if res.Output != "client said -32601\nclient said -32601\n" {
		t.Errorf("output = %q", res.Output)
	}
}

func TestPermissionShorthandAgainstOptionSets(t *testing.T) {
	all := "allow_once,allow_always,reject_once,reject_always"
	for _, tc := range []struct {
		name     string
		decision policies.Decision
		options  string
		want     string // the option id, or "cancelled"
		reason   string
	}{
		{"allow picks allow_once", policies.Allow, all, "opt-allow-once", ""},
		{"allow never falls back to allow_always", policies.Allow, "allow_always,reject_once", "cancelled", "no matching option"},
		{"allow_always picks allow_always", policies.AllowAlways, all, "opt-allow-always", ""},
		{"allow_always falls back to allow_once", policies.AllowAlways, "allow_once,reject_once", "opt-allow-once", ""},
		{"reject picks reject_once", policies.Reject, all, "opt-reject-once", ""},
		{"reject falls back to reject_always", policies.Reject, "allow_once,reject_always", "opt-reject-always", ""},
		{"reject with no reject option is cancelled", policies.Reject, "allow_once,allow_always", "cancelled", "no matching option"},
		{"cancel answers cancelled", policies.Cancel, all, "cancelled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "-permission", "execute:rm -rf build", "-perm-options", tc.options, "-no-chunks")
			h.perm = policies.Shorthand{Decision: tc.decision}
			res := h.run(context.Background())
			if want := "permission execute rm -rf build: " + tc.want + "\n"; res.Output != want {
				t.Errorf("agent saw %q, want %q", res.Output, want)
			}
			if len(res.Permissions) != 1 {
				t.Fatalf("permissions = %+v", res.Permissions)
			}
			p := res.Permissions[0]
			if p.Decision != tc.decision || p.Policy != policies.SourceWorkflow || p.Rule != "shorthand" || p.Kind != "execute" || p.ToolCallID == "" {
				t.Errorf("record = %+v", p)
			}
			if tc.reason != "" && p.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", p.Reason, tc.reason)
			}
		})
	}
}

func TestTeardownTiersThroughAStep(t *testing.T) {
	t.Run("an EOF-cooperative agent's flush completes even with a tiny term-grace", func(t *testing.T) {
		h := newHarness(t, "-eof-flush", "300ms")
		h.agent.EOFGrace = time.Minute // the flush, not the machine's pace, ends the wait
		h.agent.TermGrace = time.Millisecond
		h.agent.EOFIdle = 0 // its flush is a sleep: idle, but wanted
		h.run(context.Background())
		if len(h.recorded("flushed")) != 1 || len(h.recorded("sigterm")) != 0 {
			t.Errorf("records: %v", h.records())
		}
	})
	t.Run("an agent that ignores EOF gets SIGTERM", func(t *testing.T) {
		h := newHarness(t, "-ignore-eof")
		h.agent.EOFGrace, h.agent.TermGrace = 100*time.Millisecond, time.Minute
		h.run(context.Background())
		if len(h.recorded("sigterm")) != 1 {
			t.Errorf("records: %v", h.records())
		}
	})
	t.Run("a TERM-trapping agent is SIGKILLed within both graces", func(t *testing.T) {
		h := newHarness(t, "-ignore-eof", "-trap-term")
		// Five seconds' term grace: time for the agent to record the
		// SIGTERM it ignores before the SIGKILL, on a loaded machine too.
		h.agent.EOFGrace, h.agent.TermGrace = 100*time.Millisecond, 5*time.Second
		h.run(context.Background())
		// The tier, not the time: only SIGKILL ends this agent, and the
		// ladder sends it once both graces have run out.
		if td := teardownOf(t, h); td.Tier != "kill" {
			t.Errorf("teardown = %+v, want tier kill", td)
		}
		if len(h.recorded("sigterm")) == 0 {
			t.Errorf("SIGTERM was not tried first: %v", h.records())
		}
	})
}

func TestNoDescendantOutlivesTheStep(t *testing.T) {
	for _, flag := range []string{"-grandchild", "-setsid-grandchild", "-daemon-grandchild"} {
		t.Run(flag, func(t *testing.T) {
			h := newHarness(t, flag)
			res := h.run(context.Background())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(h.recorded("grandchild")) != 1 {
				t.Fatalf("no grandchild recorded: %v", h.records())
			}
			// run() has already asserted that it is gone.
		})
	}
}

func TestBuiltinDemoIsARealSubprocess(t *testing.T) {
	h := newHarness(t)
	h.agent.Command, h.agent.Args, h.agent.Builtin = "", nil, "demo"
	h.with["prompt"] = "hello\ntool: execute rm -rf /tmp/x"
	h.perm = policies.Shorthand{Decision: policies.Reject}
	res := h.run(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !strings.Contains(res.Output, "permission execute rm -rf /tmp/x: reject-once") {
		t.Errorf("output = %q", res.Output)
	}
	if len(res.Permissions) != 1 || res.Permissions[0].OptionID != "reject-once" {
		t.Errorf("permissions = %+v", res.Permissions)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Error("condition never met")
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAnAgentIdleAfterEOFIsSentSIGTERMAfterEOFIdleNotTheWholeGrace(t *testing.T) {
	h := newHarness(t, "-ignore-eof")
	h.agent.EOFGrace = 2 * time.Minute
	h.agent.EOFIdle = 100 * time.Millisecond
	begin := time.Now()
	h.run(context.Background())
	if len(h.recorded("sigterm")) != 1 {
		t.Errorf("records: %v", h.records())
	}
	// A hang guard: the idle cut comes after 100 ms, the grace after two
	// minutes; the spawn before either takes what the machine gives it.
	if took := time.Since(begin); took > time.Minute {
		t.Errorf("the step took %s: the idle agent was given the whole EOF grace", took)
	}
}

func TestMessagesSeparatedByToolCallsAreKeptApartAndTheLastIsFinal(t *testing.T) {
	for _, tc := range []struct {
		name         string
		flags        []string
		output, last string
	}{
		{"one message streamed in chunks is one message", []string{"-chunks", "Hel,lo"}, "Hello", "Hello"},
		{"a tool call between chunks starts a new message", []string{"-noise", "-chunks", "Step 1.,FINAL"}, "Step 1.\n\nFINAL", "FINAL"},
		{"no message at all", []string{"-no-chunks"}, "", ""},
		// With ACP's messageId, the id says what one message is: the
		// class is "chunks of one id joined whatever came between, a new
		// id a new message even with nothing between".
		{"chunks of one message id are one message across a tool call", []string{"-noise", "-chunks", "Hel,lo", "-message-ids", "m1,m1"}, "Hello", "Hello"},
		{"a new message id starts a new message", []string{"-chunks", "Step 1.,FINAL", "-message-ids", "m1,m2"}, "Step 1.\n\nFINAL", "FINAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := newHarness(t, tc.flags...).run(context.Background())
			if res.Output != tc.output || res.Final != tc.last {
				t.Errorf("output %q final %q; want %q %q", res.Output, res.Final, tc.output, tc.last)
			}
		})
	}
}

func TestAHundredThousandChunksInABurstAllArrive(t *testing.T) {
	h := newHarness(t, "-flood", "100000", "-no-chunks")
	res := h.run(context.Background())
	if res.StopReason != steps.Completed || res.Err != nil {
		t.Fatalf("stop %s: %v", res.StopReason, res.Err)
	}
	if len(res.Output) != 100000 || strings.Trim(res.Output, "x") != "" {
		t.Errorf("output has %d bytes, want 100000 x", len(res.Output))
	}
}

func TestOutputPastMaxOutputFailsTheStepAndKeepsTheFirstPart(t *testing.T) {
	h := newHarness(t, "-flood", "4000", "-flood-size", "1024", "-no-chunks")
	h.agent.MaxOutput = 64 << 10
	res := h.run(context.Background())
	if res.StopReason != steps.Error || res.Err == nil || !strings.Contains(res.Err.Error(), "max-output (64 KiB)") {
		t.Fatalf("stop %s: %v; want an error naming max-output", res.StopReason, res.Err)
	}
	if len(res.Output) != 64<<10 {
		t.Errorf("kept %d bytes, want the first %d", len(res.Output), 64<<10)
	}
	if len(h.recorded("cancel")) != 1 {
		t.Errorf("the turn was not cancelled: %v", h.recorded("cancel"))
	}
	var logged int
	for _, e := range h.events.all {
		if c, ok := e.Data.(acpagent.MessageChunk); ok {
			logged += len(c.Text)
		}
	}
	if logged > 65<<10 {
		t.Errorf("%d bytes of chunks went to the event log past the limit", logged)
	}
}

func TestAStepWithMaxOutputInWithOverridesTheAgents(t *testing.T) {
	h := newHarness(t, "-chunks", "abcdef")
	h.agent.MaxOutput = 1 << 20
	h.with["max-output"] = "4"
	res := h.run(context.Background())
	if res.Err == nil || res.Output != "abcd" {
		t.Errorf("output %q, err %v; want abcd and an error", res.Output, res.Err)
	}
}

func TestModeAndConfigAreSetAfterSessionNew(t *testing.T) {
	h := newHarness(t, "-modes", "default,ask", "-config-option", "model=small|large")
	h.agent.Mode = "ask"
	h.agent.Config = map[string]string{"model": "small"}
	h.with["config"] = map[string]any{"model": "large"}
	res := h.run(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	modes, opts := h.recorded("set_mode"), h.recorded("set_config_option")
	if len(modes) != 1 || !strings.Contains(fmt.Sprint(modes[0]["params"]), "modeId:ask") {
		t.Errorf("set_mode = %v", modes)
	}
	if len(opts) != 1 || !strings.Contains(fmt.Sprint(opts[0]["params"]), "value:large") {
		t.Errorf("set_config_option = %v (the step's config wins over the agent's)", opts)
	}
}

func TestAModeOrConfigTheAgentDoesNotOfferFailsTheStepNamingWhatItOffers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		mode   string
		config map[string]string
		want   string
	}{
		{"an unknown mode", []string{"-modes", "default,ask"}, "yolo", nil, `mode "yolo" is not one it offers (offered: default, ask)`},
		{"a mode to an agent without modes", nil, "ask", nil, `offers no session modes`},
		{"an unknown option", []string{"-config-option", "model=a|b"}, "", map[string]string{"effort": "high"}, `config effort is not an option it offers (offered: model)`},
		{"an unknown value", []string{"-config-option", "model=a|b"}, "", map[string]string{"model": "c"}, `value "c" is not one it offers (offered: a, b)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.flags...)
			h.agent.Mode, h.agent.Config = tc.mode, tc.config
			res := h.run(context.Background())
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", res.Err, tc.want)
			}
			if len(h.recorded("prompt")) != 0 {
				t.Error("the prompt was sent anyway")
			}
		})
	}
}

func TestTheStepSettlesAtTurnEndAndTheTeardownLingers(t *testing.T) {
	h := newHarness(t, "-ignore-eof")
	h.agent.EOFIdle = 0
	h.agent.EOFGrace = 2 * time.Second
	h.lingering = &sync.WaitGroup{}
	res := h.run(context.Background())
	if res.StopReason != steps.Completed {
		t.Fatalf("stop %s: %v", res.StopReason, res.Err)
	}
	// What had happened when Run returned, not how long the run took (its
	// spawn is the machine's): the teardown, which takes the agent's whole
	// EOF grace, had not ended.
	for _, e := range h.events.all[:h.eventsAtSettle] {
		if _, ok := e.Data.(acpagent.Teardown); ok {
			t.Error("Run returned after the teardown ended: it waited for it")
		}
	}
	var order []string
	for _, e := range h.events.all {
		switch d := e.Data.(type) {
		case steps.TurnEnd:
			order = append(order, "turn_end:"+string(d.StopReason))
		case acpagent.Teardown:
			order = append(order, "teardown:"+d.Tier)
		}
	}
	if strings.Join(order, " ") != "turn_end:completed teardown:term" {
		t.Errorf("events = %v, want turn_end then the teardown", order)
	}
}

func TestAgentErrorTextReachesTheStepErrorWithoutANSICodesAndItsDataAsJSON(t *testing.T) {
	err := describeRPCError(&acp.RequestError{Code: -32000, Message: "\x1b[31mquota\x1b[0m exceeded", Data: map[string]any{"codex_error_info": "other"}})
	if want := `quota exceeded (code -32000): {"codex_error_info":"other"}`; err != want {
		t.Errorf("got %q, want %q", err, want)
	}
	h := newHarness(t, "-crash-on", "session/new", "-stderr", "\x1b[1;31mboom\x1b[0m\n")
	res := h.run(context.Background())
	if res.Err == nil || strings.Contains(res.Err.Error(), "\x1b") || !strings.Contains(res.Err.Error(), "boom") {
		t.Errorf("err = %q, want the stderr tail with its colour codes stripped", res.Err)
	}
}

func TestAnOverLongLineFromTheAgentIsNamedAsSuch(t *testing.T) {
	h := newHarness(t, "-no-chunks", "-flood", "1", "-flood-size", fmt.Sprint(11<<20))
	h.agent.MaxOutput = 64 << 20
	res := h.run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "wrote a line of more than 10 MiB on stdout") {
		t.Errorf("err = %v, want it to name the over-long line (not a closed stdout)", res.Err)
	}
}

func TestAnErrorListsAtMostTwentyOfTheModesAnAgentOffers(t *testing.T) {
	var modes []string
	for i := range 500 {
		modes = append(modes, fmt.Sprintf("m%d", i))
	}
	h := newHarness(t, "-modes", strings.Join(modes, ","))
	h.agent.Mode = "nope"
	res := h.run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "m19, … and 480 more") || strings.Contains(res.Err.Error(), "m20,") {
		t.Errorf("err = %v, want the first 20 modes and a count", res.Err)
	}
}
