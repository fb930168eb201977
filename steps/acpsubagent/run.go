package acpsubagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/confine"
	"github.com/acpflow/acpflow/steps/redact"
)

// ErrAbortedBeforeStart is the seed's message for a step cancelled before
// its child was spawned.
var ErrAbortedBeforeStart = errors.New("subagent request was aborted before the ACP child started")

// stderrLinesInError is how many of the child's last stderr lines a failed
// step's error carries.
const stderrLinesInError = 10

// cancelWriteLimit bounds the wait for session/cancel to be written to the
// agent's stdin before teardown closes it.
const cancelWriteLimit = 250 * time.Millisecond

// subagent is one prepared acp-subagent step.
type subagent struct {
	kind  *Kind
	id    string
	agent *steps.Agent
	// from is the step whose session this one continues (`session:`), or
	// branches when fork is set; "" for a new session.
	from string
	fork bool
	// output is the schema the final message must match (output-schema:);
	// nil: any answer will do.
	output *outputSchema
	// sandbox is the step's with.sandbox, when sandboxSet (nil: none,
	// whatever the agent's).
	sandbox    *steps.Sandbox
	sandboxSet bool
	// withCwd is with.cwd as the file fixes it, when withCwdSet ("": it has a
	// ${{ }}, rendered at run time).
	withCwd    string
	withCwdSet bool
	// ownMCP and ownEnv are the step's with.mcp-servers and with.env as
	// the file wrote them, templates and all: what each ${{ }} produced
	// is a secret (redact.go).
	ownMCP []steps.MCPServer
	ownEnv map[string]any
}

var (
	_ steps.SessionStep    = (*subagent)(nil)
	_ steps.StructuredStep = (*subagent)(nil)
)

// AgentName implements steps.SessionStep.
func (s *subagent) AgentName() string { return s.agent.Name }

// Continues implements steps.SessionStep.
func (s *subagent) Continues() (string, bool) { return s.from, s.fork }

// JSONShape implements steps.StructuredStep.
func (s *subagent) JSONShape() *steps.Shape {
	if s.output == nil {
		return nil
	}
	return s.output.Shape()
}

// attempt is the state of one Run.
type attempt struct {
	*subagent
	// agent is the step's agent, or for a replay of a recorded model side
	// the recorded agent (replay.go); the subagent's is left as it is.
	agent *steps.Agent
	// replay is the recording a replayed agent's gateway answers from
	// (nil: none).
	replay *modelReplay
	inv    *steps.Invocation
	cwd    string
	client *client
	// p is the agent's process once the step has one (nil before).
	p         *proc
	sessionID acp.SessionId
	offered   offered // what the session offered to be set
	// kept is the kept session this attempt continues (nil: none), and
	// unlock ends its hold on that session's turn.
	kept     *kept
	unlock   func()
	prompted bool // session/prompt was sent: the turn has an end to report
	// outputLimit is the step's max-output, in bytes.
	outputLimit int64
	// sandboxRecord is the step's sandbox as it ran without its process
	// (an unenforceable optional one); else the process's confinement says.
	sandboxRecord *steps.SandboxRecord
	// mcp are the MCP servers of a new session; files the attachments of
	// the prompt.
	mcp   []acp.McpServer
	files []attachment
	// scribe keeps the attempt's transcript and scrubs what the attempt
	// records; secrets are the values of its env that no record may hold
	// (redact.go), which a process keeps for the steps it serves next.
	scribe  *scribe
	secrets []string
	// env is the environment the agent was given (nil before), emptyEnv
	// the warnings of env templates that rendered empty, and unsetEnv the
	// variables they gave (diagnose.go): what a failed start is explained
	// from.
	env      map[string]string
	emptyEnv []string
	unsetEnv []string
	// startFailed says a start request got no answer or a refusal (the
	// agent died, stalled or said no): what a likely cause explains.
	startFailed bool
	// gwPlan is the agent's gateway as this attempt resolved it (nil:
	// none), and gwTurn what its gateway tells this attempt.
	gwPlan *gatewayPlan
	gwTurn *gatewayTurn
	// metered says a gateway meters the attempt (read by its event sink,
	// from the agent's goroutines).
	metered atomic.Bool
	// endTurn cancels the attempt's context with a cause.
	endTurn context.CancelCauseFunc
}

// Run runs one attempt: start, prompt, settle (docs/acp-subagent.md). The step settles
// when its turn ends: the agent's teardown is handed to inv.Lingering and
// runs on after Run returns, so dependants need not wait for it, while the
// run still does. A process that a later step continues, or that the pool
// takes back, outlives the step (proc.release).
func (s *subagent) Run(ctx context.Context, inv *steps.Invocation) steps.Result {
	a := &attempt{subagent: s, agent: s.agent, scribe: newScribe(s.agent.Name, nil, inv.Workspace)}
	// Every event of the attempt passes the scribe: the agent's words may
	// hold a secret it was given.
	own := *inv
	if inv.Events != nil {
		own.Events = meteredSink{next: redactingSink{next: inv.Events, scribe: a.scribe}, a: a}
	}
	a.inv = &own
	// The gateway ends the turn when the provider refuses for good
	// (gateway.go): the step's context, with the refusal as its cause.
	ctx, a.endTurn = context.WithCancelCause(ctx)
	defer a.endTurn(nil)
	res := a.run(ctx)
	if res.StopReason == "" {
		res.StopReason = steps.Error
	}
	var early []policies.PermissionRecord
	if a.p != nil {
		// From here on, a request for no open session is the run's.
		early = a.p.book.leave(a.inv)
	}
	if a.client != nil {
		if res.StopReason != steps.Completed {
			a.client.quiesce(a.p.conn.Done(), 250*time.Millisecond)
		}
		a.p.unroute(a.sessionID, a.client)
		a.client.seal(cancelWriteLimit) // what is answered from now on is the run's
		res.Output, res.Final, res.Permissions = a.client.snapshot()
		select {
		case <-a.client.overflowed():
			// Past max-output the last message was cut off: what was kept
			// of it ends output, and is not recorded twice (docs/results.md:
			// a capped step's text is recorded once).
			res.Final = ""
		default:
		}
		res.Usage = a.client.turnUsageSoFar()
	}
	a.gatewayResult(&res)
	res.Permissions = append(early, res.Permissions...)
	if a.prompted {
		a.inv.Emit(steps.TurnEnd{StopReason: res.StopReason})
	}
	if a.p != nil {
		a.p.unlisten(a.scribe)
		res.Transcript = a.scribe.done()
		if res.Err != nil {
			res.Err = a.explain(res.Err, res.StopReason)
		}
		res.Stderr = a.p.child.Stderr().String()
		if a.p.confinement != nil {
			res.Sandbox = a.p.confinement.Record()
		}
		a.finish(res.StopReason == steps.Completed)
	} else if a.scribe.hasSpawn() {
		// No process came of the env decision (the policy refused the
		// spawn, the command is not there): the decision is the record.
		res.Transcript = a.scribe.done()
	}
	if res.Sandbox == nil {
		res.Sandbox = a.sandboxRecord
	}
	if a.unlock != nil {
		a.unlock()
	}
	a.scribe.Result(&res)
	return res
}

// explain adds to the error of a step whose agent ran what the agent's
// own words seldom say: the likely cause of a start that failed, or of a
// turn refused for want of credentials (an agent that starts without them
// may only ask when prompted, as claude-agent-acp does), and the last
// lines of its stderr.
func (a *attempt) explain(err error, stop steps.StopReason) error {
	a.awaitStderr()
	tail := termtext.StripANSI(a.p.child.Stderr().LastLines(stderrLinesInError))
	failedStart := a.startFailed && stop == steps.Error
	if failedStart || authRequired(err.Error()) {
		if cause := likelyCause(a.agent, err, tail, a.env, a.unsetEnv, a.emptyEnv); cause != "" {
			err = fmt.Errorf("%w\nlikely cause: %s", err, cause)
		}
	}
	if failedStart && tail == "" {
		err = fmt.Errorf("%w\n(the agent wrote nothing to stderr)", err)
	}
	if tail != "" {
		err = fmt.Errorf("%w\nagent stderr (last lines):\n%s", err, indent(tail))
	}
	return err
}

// finish hands the process on after the turn: kept for the steps that
// continue this one, its session closed before it goes back to the pool,
// and this attempt's reference released (the last one tears it down, in
// inv.Linger). A process whose turn failed, or that failed to start, is
// never used again.
func (a *attempt) finish(completed bool) {
	var reg *sessions
	if a.kept != nil || len(a.inv.ContinuedBy) > 0 {
		reg = runSessions(a.inv)
	}
	switch {
	case !completed && !a.prompted && a.kept != nil && a.p.alive():
		// Refused before its turn (a fork the agent cannot do, a mode it
		// does not offer) on a kept agent, which is as it was: the steps
		// still to continue the session keep it.
	case !completed:
		a.p.markBroken()
		if a.kept != nil {
			reg.detach(a.kept)
		}
	case a.sessionID == "":
	case len(a.inv.ContinuedBy) > 0 && reg != nil:
		reg.keep(a.id, a.p, a.sessionID, a.offered, a.inv.ContinuedBy)
		if a.kept != nil && !a.fork {
			reg.adopt(a.kept, a.p)
		}
	case a.kept != nil && !a.fork:
		// The session is the kept one's: it stays open for the steps
		// still to continue it, on this process if it is a fresh one.
		reg.adopt(a.kept, a.p)
	case a.p.pool != nil:
		a.p.closeSession(a.sessionID)
	}
	a.p.release(a.inv.Linger)
}

// awaitStderr gives a child that has exited a moment to have its last
// stderr lines read, so that a crash's own words reach the step's error.
func (a *attempt) awaitStderr() {
	select {
	case <-a.p.child.Exited():
	default:
		return
	}
	select {
	case <-a.p.child.StderrClosed():
	case <-time.After(100 * time.Millisecond):
	}
}

func (a *attempt) run(ctx context.Context) steps.Result {
	if ctx.Err() != nil {
		return steps.Result{StopReason: steps.Aborted, Err: ErrAbortedBeforeStart}
	}
	a.replayModel()
	cwd, err := steps.ResolveCwd(a.inv, a.agent.Cwd)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	a.cwd = cwd
	a.scribe.KeepPaths(cwd)
	if a.outputLimit, err = a.maxOutput(); err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	// A missing file or a broken server fails the step before anything
	// is spawned.
	if a.files, err = attachments(a.inv.With, a.inv.Workspace); err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	defer closeAttachments(a.files)
	servers, err := mcpServers(a.agent, a.inv.StepID, a.ownMCP, a.render)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	for _, sv := range servers {
		a.scribe.Add(sv.secrets)
		if sv.url != nil {
			a.scribe.AddMask(sv.url)
		}
	}
	if err := a.admitMCP(ctx, servers); err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	a.mcp = wireServers(servers)
	if ctx.Err() != nil {
		return steps.Result{StopReason: steps.Aborted, Err: ErrAbortedBeforeStart}
	}
	a.client = nil
	startCtx, cancelStart := context.WithTimeoutCause(ctx, a.agent.StartTimeout,
		fmt.Errorf("agent %s did not start within %s (start-timeout)", a.agent.Name, a.agent.StartTimeout))
	defer cancelStart()

	if a.from != "" {
		err = a.continueSession(ctx, startCtx)
	} else {
		err = a.openSession(ctx, startCtx)
	}
	if err != nil {
		if errors.Is(err, ErrAbortedBeforeStart) {
			return steps.Result{StopReason: steps.Aborted, Err: err}
		}
		if ctx.Err() != nil && a.p != nil {
			return steps.Result{StopReason: steps.Aborted, Err: fmt.Errorf("aborted while the ACP child was starting: %w", context.Cause(ctx))}
		}
		if ctx.Err() != nil {
			return steps.Result{StopReason: steps.Aborted, Err: ErrAbortedBeforeStart}
		}
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	cancelStart()

	res := a.prompt(ctx)
	res.SessionID = string(a.sessionID)
	return res
}

// openSession gets the step a process (spawned, or taken from the pool)
// and a new session on it, with the mode and config asked.
func (a *attempt) openSession(ctx, startCtx context.Context) error {
	settings, err := a.sessionSettings(false)
	if err != nil {
		return err
	}
	if err := a.obtain(ctx, startCtx); err != nil {
		return err
	}
	sess, err := a.p.newSession(startCtx, a.cwd, a.mcp, presetMeta(a.agent))
	if err != nil {
		return a.requestFailed(startCtx, err)
	}
	if sess.SessionId == "" {
		return errors.New("ACP child published without a session id")
	}
	a.offered = offered{modes: sess.Modes, options: sess.ConfigOptions}
	if err := a.claimSession(acp.AgentMethodSessionNew, sess.SessionId, ""); err != nil {
		return err
	}
	a.opened(sess.SessionId, "")
	return a.configure(startCtx, a.sessionID, a.offered, settings)
}

// opened makes id the step's session: its updates and permission
// requests come to the step's client from now on.
func (a *attempt) opened(id acp.SessionId, via string) {
	a.sessionID = id
	a.scribe.follow(string(id))
	a.client = &client{inv: a.inv, cwd: a.cwd, gate: a.p.gate, scribe: a.scribe, overflow: make(chan struct{}),
		tools: map[string]*toolState{}, failed: make(chan struct{})}
	// From the first update on: an agent may speak while the session is
	// configured (gemini answers session/set_mode with a message).
	a.client.output.limit = a.outputLimit
	a.client.turnEnded, a.client.endTurn = context.WithCancel(context.Background())
	a.client.setSession(string(id))
	a.p.route(id, a.client)
	ev := acpagent.Session{SessionID: string(id), Via: via, StartMode: termtext.Cut(a.offered.startMode(), 200), WideningOptions: a.offered.widening(a.agent.Preset)}
	if via != "" {
		ev.From = a.from
	}
	a.inv.Emit(ev)
}

// obtain gives the step a process that has been through initialize: an
// idle one of the pool when the agent is reused and one started the same
// way is there, else a fresh spawn. The env policy is asked either way:
// what it gives is part of what makes two processes the same.
func (a *attempt) obtain(ctx, startCtx context.Context) error {
	a.warnEmptyEnv()
	plan, err := a.planGateway()
	if err != nil {
		return err
	}
	a.gwPlan = plan
	env, err := a.buildEnv(ctx)
	if err != nil {
		return err
	}
	a.env = env
	path, args, err := a.command()
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ErrAbortedBeforeStart
	}
	sb := a.replayNetwork(a.sandboxOf(a.inv.Outer))
	pl, key, taken := a.fromPool(path, args, env, sb)
	if taken {
		return a.checkMCP()
	}
	spec, held, err := a.prepareSpawn(sb, path, args, env)
	if err != nil {
		return err
	}
	ac, err := spawn(held.c, spec)
	if err != nil {
		held.release()
		return fmt.Errorf("agent %s: cannot start %s: %w", a.agent.Name, path, err)
	}
	held.c.Attach(ac.child.Pid())
	a.p = newProc(ac, a.agent, a.inv)
	a.p.book.use(a.inv, a.cwd)
	a.p.presetDir, a.p.confinement, a.p.gateway = held.dir, held.c, held.gw
	a.useGateway(a.p)
	a.p.pool, a.p.poolKey, a.p.secrets = pl, key, a.secrets
	a.p.listen(a.scribe)
	ac.connectTapped(a.p.handle, a.p.tapLine)
	// On record before it is announced or driven: if acpflow dies from
	// here on, resume can find the agent's group. The wait overlaps the
	// agent's own start (the run's record may still be being written).
	if err := a.inv.ProcessStarted(ac.child.Pid(), ac.child.StartTicks()); err != nil {
		return fmt.Errorf("agent %s: %w", a.agent.Name, err)
	}
	a.inv.Emit(acpagent.Spawned{PID: ac.child.Pid(), StartTicks: ac.child.StartTicks(), Cwd: a.cwd})
	return a.greet(startCtx)
}

// fromPool gives the attempt an idle process of the pool when the agent
// is reused and one started the same way is there (taken); else it
// returns the pool and key the new process goes back to when done.
func (a *attempt) fromPool(path string, args []string, env map[string]string, sb *steps.Sandbox) (*pool, string, bool) {
	if !a.agent.Reuse {
		return nil, "", false
	}
	pl := batchPool(a.inv)
	if pl == nil {
		return nil, "", false
	}
	// The sandbox and the gateway are part of how the process was
	// started: a confined agent never serves a step that asked for
	// another.
	key := reuseKey(path, args, env, a.agent.Auth+"\x00"+sb.String()+"\x00"+a.agent.Gateway.String())
	p := pl.take(key, a.inv)
	if p == nil {
		return pl, key, false
	}
	a.p = p
	p.book.use(a.inv, a.cwd)
	p.listen(a.scribe)
	a.useGateway(p)
	a.inv.Emit(acpagent.Reused{PID: p.child.Pid()})
	return pl, key, true
}

// spawnHeld is what a spawn holds besides its process, each process's
// own (made after the pool's key): its model gateway, its preset's
// config directory and its confinement, released together if the spawn
// fails (else by the process's teardown).
type spawnHeld struct {
	gw  *gatewayRoute
	dir string
	c   *confine.Confinement
}

func (h spawnHeld) release() {
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
	if h.c != nil {
		h.c.Release()
	}
	h.gw.close()
}

// prepareSpawn starts the gateway (pointing env at it), writes the
// preset's files and confines the spec, in that order: the gateway's
// variables are in the env the preset's files and the sandbox see.
func (a *attempt) prepareSpawn(sb *steps.Sandbox, path string, args []string, env map[string]string) (procgroup.Spec, spawnHeld, error) {
	var held spawnHeld
	spec := procgroup.Spec{Path: path, Args: args, Dir: a.cwd, OnDescendant: a.descendantSeen}
	var err error
	if a.gwPlan != nil {
		if held.gw, err = a.startGateway(env, args); err != nil {
			return spec, held, err
		}
	}
	if held.dir, err = presetDir(a.agent, env, args); err != nil {
		held.release()
		return spec, held, err
	}
	if sb != nil {
		if held.c, err = a.confineSpec(sb, env, &spec, held.gw); err != nil {
			held.release()
			return spec, held, err
		}
	}
	spec.Env = policies.EnvList(env)
	return spec, held, nil
}

// greet takes a freshly spawned agent through initialize (and
// authenticate when the step names a method), then checks its MCP
// servers. The preset's auth aliases keep an old workflow's method name
// working, with a warning.
func (a *attempt) greet(startCtx context.Context) error {
	var aliases map[string]string
	if p, ok := acpagent.LookupPreset(a.agent.Preset); ok {
		aliases = p.AuthAliases
	}
	warn := func(msg string) { a.inv.Emit(steps.Warning{Message: "agent " + a.agent.Name + ": " + msg}) }
	if err := a.p.hello(startCtx, a.agent.Auth, aliases, warn, a.initialized); err != nil {
		return a.requestFailed(startCtx, err)
	}
	return a.checkMCP()
}

// checkMCP checks the step's MCP servers against what the agent
// advertised; a pooled agent was checked by the step that started it, but
// not for this step's servers.
func (a *attempt) checkMCP() error {
	return checkMCP(a.agent.Name, a.mcp, a.p.caps.McpCapabilities)
}

// requestFailed words a failed start request (a *requestError).
func (a *attempt) requestFailed(ctx context.Context, err error) error {
	var re *requestError
	if errors.As(err, &re) {
		return a.startError(ctx, re.method, re.err)
	}
	return fmt.Errorf("agent %s: %w", a.agent.Name, err)
}

// initialized reads the agent's initialize answer as the SDK's typed
// request would (an answer that does not decode is the SDK's internal
// error), keeps its capabilities and reports it.
func (a *attempt) initialized(raw json.RawMessage) error {
	var init acp.InitializeResponse
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &init); err != nil {
			return acp.NewInternalError(map[string]any{"error": err.Error()})
		}
	}
	a.p.caps = init.AgentCapabilities
	info := acpagent.Initialized{ProtocolVersion: int(init.ProtocolVersion)}
	if init.AgentInfo != nil {
		info.AgentName, info.AgentVersion = &init.AgentInfo.Name, &init.AgentInfo.Version
	}
	a.inv.Emit(info)
	return nil
}

// startError words a failure of one start request: a timeout, the child's
// death, or the agent's own error (e.g. "Authentication required").
func (a *attempt) startError(ctx context.Context, method string, err error) error {
	a.startFailed = true
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%w: no answer to %s", cause, method)
		}
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if exited := a.p.exitNote(); exited != "" {
		return fmt.Errorf("agent %s %s during %s", a.agent.Name, exited, method)
	}
	return fmt.Errorf("agent %s: %s failed: %s", a.agent.Name, method, describeRPCError(err))
}

// prompt sends the step's prompt and waits for its turn to end. A step
// with an output schema then checks the final message; while it does not
// match and follow-ups are left, one more prompt goes to the same session
// saying what was wrong, under the same ctx (the step's timeout counts
// them all). The step fails when the last answer still does not match.
func (a *attempt) prompt(ctx context.Context) steps.Result {
	text, _ := a.inv.With["prompt"].(string)
	blocks, err := promptBlocks(text, a.files, a.p.caps.PromptCapabilities)
	closeAttachments(a.files) // read: not held through the turn
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: err}
	}
	res := a.turn(ctx, blocks)
	if a.output == nil {
		return res
	}
	for retry := 1; res.StopReason == steps.Completed; retry++ {
		value, wrong := a.output.Check(a.client.final())
		if wrong == nil {
			res.JSON = value
			return res
		}
		if retry > a.output.retries {
			return steps.Result{StopReason: steps.Error, Err: a.output.mismatch(wrong)}
		}
		if ctx.Err() != nil {
			return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
		}
		a.inv.Emit(acpagent.SchemaRetry{Retry: retry, Retries: a.output.retries, Errors: wrong})
		a.client.beginTurn()
		res = a.turn(ctx, []acp.ContentBlock{acp.TextBlock(a.output.followUp(wrong))})
	}
	return res
}

// turn sends one session/prompt and waits for the turn to end, ctx to be
// cancelled, or the output to pass its limit; on cancel it sends
// session/cancel and settles at once.
func (a *attempt) turn(ctx context.Context, blocks []acp.ContentBlock) steps.Result {
	type answer struct {
		resp promptAnswer // its usage read leniently (usage.go)
		err  error
	}
	// The prompt's own context is never cancelled: cancelling it would make
	// the SDK send $/cancel_request and a second session/cancel. A cancel
	// is the one session/cancel sent below; teardown closes the connection,
	// which ends the request.
	done := make(chan answer, 1)
	a.prompted = true
	// From here a line that is not JSON fails the turn (nonprotocol.go).
	a.p.gate.turnBegins()
	defer a.p.gate.turnEnds()
	go func() {
		resp, err := acp.SendRequest[promptAnswer](a.p.conn, context.Background(), acp.AgentMethodSessionPrompt, acp.PromptRequest{
			SessionId: a.sessionID,
			Prompt:    blocks,
		})
		done <- answer{resp, err}
	}()

	select {
	case ans := <-done:
		if err := a.client.turnFailure(); err != nil {
			return steps.Result{StopReason: steps.Error, Err: err}
		}
		if ans.err != nil {
			return steps.Result{StopReason: steps.Error, Err: a.promptError(ans.err)}
		}
		a.client.turnUsage(ans.resp.Usage)
		if err := a.client.modelFailure(); err != nil {
			return steps.Result{StopReason: steps.Error, Err: err}
		}
		return settle(ans.resp.StopReason)
	case <-a.client.failed:
		a.cancel()
		return steps.Result{StopReason: steps.Error, Err: a.client.turnFailure()}
	case <-a.client.overflowed():
		a.cancel()
		limit := a.client.output.limit
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("agent %s: its output passed max-output (%s); the first %s are kept and the turn was cancelled", a.agent.Name, bytesize.Format(limit), bytesize.Format(limit))}
	case <-ctx.Done():
		a.cancel()
		return steps.Result{StopReason: steps.Aborted, Err: context.Cause(ctx)}
	}
}

// promptError words a failed session/prompt: the gate's reason, the
// agent's death, or the agent's own error.
func (a *attempt) promptError(err error) error {
	if cause := a.p.gate.cause(); cause != nil {
		var stray *nonProtocolLine
		if errors.As(cause, &stray) {
			return fmt.Errorf("agent %s %s", a.agent.Name, stray.quoted(a.scribe.Text))
		}
		return fmt.Errorf("agent %s %w", a.agent.Name, cause)
	}
	if exited := a.p.exitNote(); exited != "" {
		return fmt.Errorf("agent %s %s during session/prompt", a.agent.Name, exited)
	}
	return fmt.Errorf("agent %s: session/prompt failed: %s", a.agent.Name, describeRPCError(err))
}

// cancel sends session/cancel, best effort and bounded: an agent that does
// not read its stdin (a full pipe) must not hold the step; teardown closes
// the pipe. Permission requests from now on are answered `cancelled`.
func (a *attempt) cancel() {
	a.client.markCancelled()
	sent := make(chan struct{})
	go func() {
		a.p.conn.SendNotification(context.Background(), acp.AgentMethodSessionCancel, acp.CancelNotification{SessionId: a.sessionID})
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(cancelWriteLimit):
	}
	a.inv.Emit(acpagent.CancelSent{})
	a.client.answersSettled(cancelWriteLimit)
}

// settle maps an ACP stop reason to the step's (docs/acp-subagent.md#the-turn).
func settle(r acp.StopReason) steps.Result {
	switch r {
	case acp.StopReasonEndTurn:
		return steps.Result{StopReason: steps.Completed}
	case acp.StopReasonMaxTokens:
		return steps.Result{StopReason: steps.MaxTokens, Err: errors.New("the agent stopped: max_tokens")}
	case acp.StopReasonRefusal:
		return steps.Result{StopReason: steps.Refusal, Err: errors.New("the agent refused")}
	case acp.StopReasonCancelled:
		return steps.Result{StopReason: steps.Aborted, Err: errors.New("the agent cancelled the turn")}
	case acp.StopReasonMaxTurnRequests:
		return steps.Result{StopReason: steps.Error, Err: errors.New("the agent stopped: max_turn_requests")}
	}
	return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("the agent stopped with unknown stop reason %q", string(r))}
}

// descendantSeen records a process seen below the agent, so that resume
// can kill it if acpflow is killed, then reports it.
func (a *attempt) descendantSeen(agent int, p procgroup.Proc) {
	a.inv.ProcessSeen(agent, p.PID, p.StartTicks)
	a.inv.Emit(acpagent.Descendant{AgentPID: agent, PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks})
}

// command resolves what to spawn. A builtin agent is acpflow's own
// executable, so the demo agent is a real subprocess like any other; the
// replay agent is told the transcript file and the step to play.
func (a *attempt) command() (string, []string, error) {
	if a.agent.Builtin != "" {
		args := append(append([]string(nil), a.kind.SelfArgs...), a.agent.Builtin)
		if a.agent.Builtin == replayagent.Name {
			file, step, err := replayagent.Source(a.agent.From, a.inv.StepID)
			if err != nil {
				return "", nil, fmt.Errorf("agents.%s.%w", a.agent.Name, err)
			}
			args = append(args, file, step)
		}
		return a.kind.Self, args, nil
	}
	args := make([]string, len(a.agent.Args))
	for i, arg := range a.agent.Args {
		r, err := a.render(arg)
		if err != nil {
			return "", nil, fmt.Errorf("agents.%s.args[%d]: %w", a.agent.Name, i, err)
		}
		args[i] = r
	}
	path, err := lookPath(a.agent)
	if err != nil {
		return "", nil, err
	}
	return path, args, nil
}

func (a *attempt) render(s string) (string, error) {
	if a.inv.Render == nil {
		return s, nil
	}
	return a.inv.Render(s)
}

// explicitEnv is what the workflow sets in the agent's environment (the
// agent's env:, the step's with.env), rendered, with who set each name,
// and the secrets its templates produced. Under a gateway its variables
// are left out: they are the gateway's to set.
func (a *attempt) explicitEnv() (explicit, setBy map[string]string, secrets []string, err error) {
	explicit, setBy = map[string]string{}, map[string]string{}
	for k, v := range a.agent.Env {
		if a.hidden(k) {
			continue
		}
		pieces, err := redact.RenderPieces(v, a.render)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("agents.%s.env.%s: %w", a.agent.Name, k, err)
		}
		explicit[k], setBy[k] = redact.Joined(pieces), "agent "+a.agent.Name+"'s env"
		secrets = append(secrets, redact.Produced(pieces)...)
	}
	stepEnv := "step " + a.inv.StepID + "'s env"
	switch env := a.inv.With["env"].(type) {
	case map[string]any:
		for k, v := range env {
			if !a.hidden(k) {
				explicit[k], setBy[k] = fmt.Sprint(v), stepEnv
			}
		}
	case map[string]string:
		for k, v := range env {
			if !a.hidden(k) {
				explicit[k], setBy[k] = v, stepEnv
			}
		}
	}
	for k, v := range a.ownEnv {
		if raw, ok := v.(string); ok && strings.Contains(raw, "${{") {
			pieces, err := redact.RenderPieces(raw, a.render)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("with.env.%s: %w", k, err)
			}
			secrets = append(secrets, redact.Produced(pieces)...)
		}
	}
	return explicit, setBy, secrets, nil
}

// buildEnv asks the env policy, within the outer policy, for the child's
// environment, failing closed.
func (a *attempt) buildEnv(ctx context.Context) (map[string]string, error) {
	explicit, setBy, secrets, err := a.explicitEnv()
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, redact.CredentialValues(explicit)...)
	secrets = append(secrets, redact.CredentialValues(a.inv.Ambient)...)
	a.scribe.Add(secrets)
	req := &policies.EnvRequest{
		Request: policies.Request{Kind: "env", Workflow: a.inv.Workflow, RunID: a.inv.RunID, Step: a.inv.StepID,
			Agent: a.agent.Name, Workspace: a.inv.Workspace, Cwd: a.cwd},
		Ambient:  a.visibleAmbient(),
		Explicit: explicit,
	}
	dec, err := a.inv.Outer.BuildEnv(ctx, a.inv.Env, req)
	var refused *policies.OuterEnvError
	if errors.As(err, &refused) {
		switch refused.SetBy {
		case policies.SetByExplicit:
			refused.SetBy = setBy[refused.Var]
		case policies.SetByPolicy:
			refused.SetBy = fmt.Sprintf("the env policy (%s)", a.inv.EnvSource)
		}
	}
	a.recordSpawn(req, dec, err)
	switch {
	case refused != nil:
		return nil, a.sawAll(req).Err(refused)
	case err != nil:
		return nil, a.sawAll(req).Err(fmt.Errorf("env policy (%s) failed, spawn refused: %w", a.inv.EnvSource, err))
	}
	if dec.Deny != "" {
		return nil, a.sawAll(req).Err(fmt.Errorf("env policy (%s) refused the spawn: %s", a.inv.EnvSource, dec.Deny))
	}
	withPWD(dec.Env, explicit, a.cwd)
	a.dropDecideAloneEnv(dec.Env)
	// A module may add or change values: its credentials are secrets too.
	a.secrets = append(a.secrets, secrets...)
	a.secrets = append(a.secrets, redact.CredentialValues(dec.Env)...)
	a.scribe.Add(a.secrets)
	names := make([]string, 0, len(dec.Env))
	for k := range dec.Env {
		names = append(names, k)
	}
	a.inv.Emit(acpagent.Env{Policy: string(a.inv.EnvSource), Rule: dec.Rule, Names: len(names), PolicyStderr: dec.Stderr, Outer: dec.Outer})
	return dec.Env, nil
}

// dropDecideAloneEnv removes from env, under a permission policy other
// than allow, the variables that make the agent approve everything itself
// (acpagent.DecideAloneEnv), saying so: the policy would see none of its
// calls, and its session would not say it.
func (a *attempt) dropDecideAloneEnv(env map[string]string) {
	if a.inv.Outer.AllowsAll(a.inv.Permission) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if acpagent.DecideAloneEnv(a.agent.Preset, k, env[k]) {
			delete(env, k)
			a.inv.Emit(steps.Warning{Message: fmt.Sprintf("agent %s: %s was dropped from its environment: it makes the agent approve its own tool calls, which the permission policy must see (only permission: allow keeps it)", a.agent.Name, k)})
		}
	}
}

// recordSpawn keeps the env decision with the attempt's transcript, by
// name only, for `acpflow policy test` (docs/transcripts.md). A refused
// spawn gave the child nothing, so its reason to refuse, the one thing
// recorded then, is scrubbed of every value the policy saw.
func (a *attempt) recordSpawn(req *policies.EnvRequest, dec policies.EnvDecision, err error) {
	sp := &transcript.Spawn{
		Policy: a.inv.EnvSource, Rule: dec.Rule, Cwd: a.cwd,
		Ambient: sortedNames(req.Ambient), Explicit: sortedNames(req.Explicit), Env: sortedNames(dec.Env),
	}
	var refused *policies.OuterEnvError
	switch {
	case errors.As(err, &refused):
		sp.Deny = refused.Error() // a refusal, which names its layer, not a failure
	case err != nil:
		sp.Deny = "policy error: " + err.Error()
	case dec.Deny != "":
		sp.Deny = dec.Deny
	}
	if sp.Deny != "" {
		sp.Env = []string{}
		sp.Deny = a.sawAll(req).Text(sp.Deny)
	}
	a.scribe.spawned(sp)
}

// sortedNames are an environment's names, sorted: how a spawn records it.
func sortedNames(env map[string]string) []string {
	if len(env) == 0 {
		return []string{}
	}
	return slices.Sorted(maps.Keys(env))
}

// withPWD sets PWD to the child's working directory, unless the workflow
// set it: inherited, it would name acpflow's directory, and shells and
// tools trust PWD over getcwd when it names the same file.
func withPWD(env, explicit map[string]string, cwd string) {
	if _, set := explicit["PWD"]; !set && env != nil {
		env["PWD"] = cwd
	}
}

func agentName(inv *steps.Invocation) string {
	s, _ := inv.With["agent"].(string)
	return s
}

// describeRPCError turns an SDK error into the agent's own words where it
// sent some ("Authentication required (code -32000)"), with its data as
// JSON, not a Go map.
func describeRPCError(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s (code %d)", re.Message, re.Code)
		if re.Data != nil {
			if b, err := json.Marshal(re.Data); err == nil {
				msg += ": " + string(b)
			}
		}
		return termtext.StripANSI(msg)
	}
	return err.Error()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// noiseCounter is the SDK's logger: it counts what the SDK could not parse
// (non-JSON lines on the agent's stdout) instead of printing it, since those
// lines may carry anything the agent printed, secrets included.
type noiseCounter struct{ n *atomic.Int64 }

func (h noiseCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h noiseCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "parse") {
		h.n.Add(1)
	}
	return nil
}
func (h noiseCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h noiseCounter) WithGroup(string) slog.Handler      { return h }
