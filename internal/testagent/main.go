// Command testagent is a scripted, misbehaving ACP agent for acpflow's own tests. It speaks
// raw JSON-RPC lines (no SDK), so that it can answer late, wrongly or never, crash, leak
// descendants and ignore signals on purpose. Tests build it with `go build` and spawn it as a
// real subprocess. Its behaviour is set by flags only: the environment it sees is what the code
// under test gave it, which it records.
//
// With no flags it is well behaved: it answers initialize, session/new and one prompt with the
// chunks "Hello, " and "world" and stop reason end_turn, and exits 0 when stdin closes.
//
// Flags:
//
//	-stop REASON             stop reason of the prompt answer (any string; default end_turn)
//	-chunk TEXT              an agent_message_chunk text; repeatable, in order (default "Hello, " "world")
//	-chunks A,B,C            the same, comma-separated, appended after the -chunk ones
//	-no-chunks               send no message chunk at all
//	-answer TEXT             the answer to one prompt, as its only chunk, instead of the chunks:
//	                         repeatable, the Nth -answer answers the Nth session/prompt the agent
//	                         receives (in any session), the last one every later prompt
//	-noise                   before each chunk and after the last, send a thought ("thinking..."),
//	                         a tool_call, a tool_call_update, a plan, a current_mode_update, an
//	                         available_commands_update, a user_message_chunk ("NOISE …") and an
//	                         agent_message_chunk "LEAK" for another session id
//	-flood N                 before the chunks, stream N agent_message_chunks of -flood-size
//	                         bytes ("x"…) as fast as the pipe takes them
//	-flood-size N            bytes per flood chunk (default 1)
//	-modes A,B               session/new offers these modes (the first current); session/set_mode
//	                         to one of them is recorded and answered {}
//	-config-option ID=V1|V2  session/new offers a select config option ID with these values
//	                         (repeatable; ID "mode" is of category mode, as opencode's; ID:CAT
//	                         gives it category CAT, as Copilot's allow_all:permissions=off|on);
//	                         session/set_config_option is recorded and answered {}
//	-switch-option ID=VALUE  at the start of a turn, after -switch-mode, send config_option_update
//	                         with option ID at VALUE (as Copilot's allow_all turned on), then wait
//	                         up to 2 s for a session/set_config_option ("option set back" in the
//	                         output)
//	-record FILE             append one JSON line per event to FILE (see below)
//	-session-id ID           the session id session/new answers (default random "ta-…")
//	-no-session-id           session/new answers {} (no sessionId)
//	-protocol-version N      the protocolVersion initialize answers (default 1)
//	-crash-on METHOD         on receiving METHOD, write "testagent: crashing on METHOD" and three
//	                         numbered lines to stderr, then exit 3 without answering
//	-hang-on METHOD          never answer METHOD (repeatable); everything else goes on
//	-stderr-lines N          write "stderr line 1" … "stderr line N" to stderr at startup
//	-stderr TEXT             write TEXT as it is to stderr at startup, after the -stderr-lines
//	                         (repeatable; e.g. escape sequences, to test what reaches a terminal)
//	-agent-info JSON         the agentInfo initialize answers, as given (default
//	                         {"name":"testagent","version":"0.0.0"})
//	-capabilities JSON       the agentCapabilities initialize answers, as given (default
//	                         {"loadSession":false,"promptCapabilities":{…all false}})
//	-mcp-capabilities LIST   set agentCapabilities.mcpCapabilities to these, true (comma-
//	                         separated: http, sse, acp), over -capabilities
//	-prompt-capabilities LIST  set agentCapabilities.promptCapabilities to these, true (image,
//	                         audio, embeddedContext), over -capabilities
//	-echo-request            start the answer with one chunk: a JSON line summing up what the
//	                         agent was sent, {"mcpServers": […], "prompt": […]}: per server its
//	                         name, type, command, args, url and the NAMES of its env and headers
//	                         (never their values: the answer is acpflow's output, recorded; the
//	                         values are in the -record file's session_new); per prompt block its
//	                         type and uri, name, mimeType, size, and the length of its text or data
//	-garbage                 write "this is not json" and "{broken" lines before every message
//	-require-auth ID         advertise auth method ID; session/new fails with -32000
//	                         "Authentication required" until authenticate with methodId ID
//	-prompt-auth-required    every session/prompt fails with -32000 "Authentication required" (as
//	                         claude-agent-acp does when Claude Code has no credentials)
//	-prompt-delay DUR        wait DUR before answering a prompt (a session/cancel ends the wait)
//	-prompt-hang             never answer a prompt unless it is cancelled
//	-call-model N            during each prompt, N times: POST a Messages request to
//	                         $ANTHROPIC_BASE_URL/v1/messages with x-api-key $ANTHROPIC_API_KEY,
//	                         as claude does, and add the answer's text (or, when the call
//	                         failed, an apology naming the status) as a line of the output;
//	                         each call is recorded as a model_call event; a prompt holding
//	                         "model calls: K" makes it K calls instead
//	-stream-model            ask -call-model's answers as streams ("stream": true) and join
//	                         the text deltas of the event stream
//	-usage-tokens N          the prompt answer carries usage: inputTokens N-N/4, outputTokens
//	                         N/4, totalTokens N (the turn's, as claude-agent-acp counts)
//	-usage-json JSON         the prompt answer's usage is this JSON as given (over -usage-tokens;
//	                         e.g. {"outputTokens": 7.5} or "lots": what a bad agent sends)
//	-usage-update-json JSON  at the start of each turn, send a usage_update with these fields as
//	                         given (a JSON object: used, size, cost, …)
//	-update-json JSON        at the start of each turn, send this session update as given
//	                         ({"sessionUpdate": "notice", ...}: kinds newer than the SDK;
//	                         repeatable, sent in order)
//	-usage-cost X            at the start of each turn, before any -prompt-delay or -hang,
//	                         send a usage_update with the session's cumulative cost: X times
//	                         the session's turns so far, in -usage-currency (default USD),
//	                         and used 1000 per turn of size 200000
//	-ignore-cancel           record session/cancel but go on as if it never came
//	                         (a cancel only ends the turns of the session it names)
//	-permission KIND:TITLE   before answering, ask session/request_permission for this tool call
//	                         (repeatable, in order) and add "permission KIND TITLE: OUTCOME\n"
//	                         to the output, OUTCOME being the option id chosen, "cancelled",
//	                         or "error CODE"
//	-unasked KIND:TITLE      during the prompt, run this tool call without asking: a tool_call
//	                         (pending), tool_call_updates in_progress and completed, and the
//	                         line "ran KIND TITLE unasked" in the output (repeatable)
//	-unasked-failed KIND:TITLE  the same, but the call ends failed (as codex-acp reports a command
//	                         that failed in its own sandbox), after the -unasked ones
//	-permission-json JSON    ask session/request_permission with these params as given (a JSON
//	                         object, e.g. {"toolCall": {…}, "options": […]}; sessionId is
//	                         set), after the -permission ones; repeatable; adds "permission
//	                         json N: OUTCOME\n" to the output, N counting from 1
//	-announce-first          announce each -permission call as in_progress before asking, and
//	                         complete it after the answer (codex-acp's patches)
//	-switch-mode MODE        at the start of a turn, send current_mode_update MODE, then wait up
//	                         to 2 s for a session/set_mode ("mode set back" in the output)
//	-refuse-set-mode         answer session/set_mode with an error
//	-system-error TEXT       after the chunks, report a failed model call as codex-acp does:
//	                         session_info_update with _meta.codex.threadStatus {type:
//	                         systemError}, then the message TEXT (after a tool call, so that it
//	                         is a message of its own), then end_turn
//	-message-ids A,B,…       the messageId of each chunk, in order
//	-perm-options K,K,…      the option kinds offered (default allow_once,allow_always,
//	                         reject_once,reject_always; ids "opt-allow-once" …; "" = none)
//	-ask-client METHOD       during the prompt, send a request the client should not serve
//	                         (e.g. fs/read_text_file, terminal/create); repeatable; record the
//	                         error code and add "client said CODE\n" ("client said ok\n") to the output
//	-try ACTION              during the prompt, after the -ask-client calls, try ACTION and add
//	                         "try ACTION: ok" (" (detail)" may follow) or "try ACTION: ERR NAME
//	                         (text)" to the output, NAME the errno ("EACCES") when the error has
//	                         one (repeatable, in order; each recorded as a try event). ACTION is
//	                         write:PATH (create or truncate PATH, write a line), read:PATH (the
//	                         detail is the size, never the content), environ:PID (read
//	                         /proc/PID/environ; the detail is the number of variables),
//	                         signal:PID[:SIG] (send SIG: USR1 by default, whose default action
//	                         ends the target, else USR2, CONT, HUP, TERM or 0), connect:HOST:PORT
//	                         (a direct TCP dial, 2 s timeout), proxy:HOST:PORT (CONNECT through
//	                         $HTTPS_PROXY/$HTTP_PROXY, then GET / through the tunnel: ok when an
//	                         HTTP answer comes back; else the proxy's status), get:URL (GET
//	                         through the proxy of the environment, loopback hosts included, or
//	                         directly without one: ok on 2xx). A PID may be @FILE: the number in
//	                         FILE, waited for up to 5 s. Every action is bounded (5 s at most)
//	-exit-after-session-new  exit 0 right after answering session/new
//	-exit-mid-prompt         send the chunk "partial", then exit 1 during the prompt
//	-eof-flush DUR           on stdin EOF, wait DUR before exiting 0 (default 0)
//	-ignore-eof              on stdin EOF, keep running until a signal
//	-trap-term               ignore SIGTERM (recording it), so that only SIGKILL ends the agent;
//	                         without it, SIGTERM is recorded and the agent exits 143
//	-grandchild              at startup, spawn a sleeper in the agent's process group
//	-setsid-grandchild       at startup, spawn a sleeper in a session of its own (setsid)
//	-daemon-grandchild       at startup, double-fork a setsid sleeper whose parent exits at once
//	-turn-end-spawn HOW      right after answering a prompt, without waiting, start descendants
//	                         meant to escape the teardown that follows (repeatable): setsid (a
//	                         setsid sleeper), daemon (a double fork: a middle process starts a
//	                         setsid sleeper and exits), storm (eight setsid sleepers at once),
//	                         refork (a setsid daemon that starts a copy of itself and exits, 200
//	                         generations, then sleeps), sh (a shell that forks, without exec, a
//	                         setsid shell which forks sleepers in a loop). Each sleeper records
//	                         itself as a grandchild; a shell's are found by the agent's marker
//	-lifetime DUR            leak guard: exit 124 after DUR whatever happens (default 10m)
//	-stray-permission WHEN, -permission-session ID, -fork-session-id ID
//	                         requests outside any turn, and sessions that are not the turn's
//	                         own: see stray.go
//	-permission-size FIELD=N, -permission-flood N, -banner TEXT, -stdout-line TEXT
//	                         requests too large or too many, and stdout lines that are not
//	                         JSON: see bounds.go
//
// Sleepers inherit the agent's stdout and stderr (stdin is /dev/null), ignore SIGHUP, and ignore
// SIGTERM too when the agent has -trap-term. Helper modes, used by the agent on itself: -sleep
// (be a sleeper; with -sleeper-how HOW it records itself as a grandchild), -spawn-setsid-and-exit
// (the middle of -daemon-grandchild and of -turn-end-spawn daemon) and -refork N (a generation
// of -turn-end-spawn refork).
//
// Recorded events, one JSON object per line, each written by a single O_APPEND write so that
// the file survives a SIGKILL:
//
//	{"event":"start","pid","ppid","pgid","pid_ns","cwd","env":{…},"args":[…]}
//	                          (pid_ns: the link /proc/self/ns/pid, "pid:[INODE]"; the pids are
//	                          that namespace's, the sandbox's own when acpflow sandboxes the agent)
//	{"event":"grandchild","pid","how":"child|setsid|daemon","pid_ns"}
//	{"event":"initialize","params"}   {"event":"authenticate","params"}
//	{"event":"session_new","params","session_id"[,"error"]}
//	{"event":"prompt","params"}       {"event":"cancel","params"}
//	{"event":"permission_answer","tool_call_id","result"|"error"}
//	{"event":"client_error","method","code"[,"result"]}   (code 0: the client answered a result)
//	{"event":"try","action","ok","line"}   {"event":"model_call","status","text"}
//	{"event":"crash","method"}        {"event":"hang","method","params"}
//	{"event":"eof"}  {"event":"flushed"}  {"event":"sigterm"}
//	{"event":"stdout_error","error"}  {"event":"lifetime_expired"}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// config is the agent's script, from its flags.
type config struct {
	stop        string
	chunks      []string
	noChunks    bool
	answers     []string
	noise       bool
	flood       int
	floodSize   int
	chunkEvery  time.Duration // the wait before each chunk but the first
	modes       []string
	configOpts  []string
	record      string
	sessionID   string
	noSessionID bool
	protocol    int

	crashOn      string
	hangOn       []string
	stderrLines  int
	stderrText   []string
	capabilities json.RawMessage
	agentInfo    json.RawMessage
	echoRequest  bool
	garbage      bool
	requireAuth  string
	// promptAuthRequired fails every session/prompt as claude-agent-acp
	// does when Claude Code has no credentials.
	promptAuthRequired bool

	promptDelay  time.Duration
	promptHang   bool
	ignoreCancel bool

	usageTokens   int
	callModel     int
	streamModel   bool
	usageJSON     json.RawMessage
	usageUpdate   json.RawMessage
	updates       []json.RawMessage // -update-json, each sent as given at the start of each turn
	usageCost     float64
	usageCurrency string
	permissions   []toolRequest
	permOptions   []string
	unasked       []toolRequest
	announceFirst bool
	switchMode    string
	switchOption  string
	refuseSetMode bool
	systemError   string
	messageIDs    []string
	askClient     []string
	tries         []string

	exitAfterSessionNew bool
	exitMidPrompt       bool

	eofFlush  time.Duration
	ignoreEOF bool
	// exitOnClose exits 0 once session/close is answered: an agent that
	// ends when its client closes its session (with -ignore-eof, only then).
	exitOnClose bool
	trapTerm    bool

	grandchild       bool
	setsidGrandchild bool
	daemonGrandchild bool
	lifetime         time.Duration
	turnEndSpawn     []string

	stray  strayScript  // stray.go
	bounds boundsScript // bounds.go

	// helper modes
	sleep              bool
	sleeperHow         string
	spawnSetsidAndExit bool
	refork             int
}

// toolRequest is one -permission KIND:TITLE, or one -permission-json (raw
// set: the request's params as given).
type toolRequest struct {
	kind, title string
	raw         json.RawMessage
	failed      bool // an -unasked-failed call: it ends failed
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func parseFlags(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("testagent", flag.ContinueOnError)
	var chunk, hangOn, permission, askClient, answer, unasked, unaskedFailed, tries listFlag
	var messageIDs string
	var chunks, permOptions, capabilities, mcpCaps, promptCaps string
	var stderrText, turnEndSpawn listFlag
	var permissionJSON, updateJSON listFlag
	var usageJSON, usageUpdate, agentInfo string

	fs.StringVar(&cfg.stop, "stop", "end_turn", "stop reason of the prompt answer")
	fs.Var(&chunk, "chunk", "an agent_message_chunk text (repeatable)")
	fs.StringVar(&chunks, "chunks", "", "comma-separated chunk texts")
	fs.BoolVar(&cfg.noChunks, "no-chunks", false, "send no message chunk")
	fs.Var(&answer, "answer", "the Nth -answer is the only chunk of the Nth prompt's answer (repeatable)")
	fs.BoolVar(&cfg.noise, "noise", false, "send updates that are not output around the chunks")
	var modes string
	var configOpts listFlag
	fs.IntVar(&cfg.flood, "flood", 0, "stream this many chunks before the others")
	fs.IntVar(&cfg.floodSize, "flood-size", 1, "bytes per flood chunk")
	fs.DurationVar(&cfg.chunkEvery, "chunk-every", 0, "wait this long before each -chunk but the first (an answer written over time)")
	fs.StringVar(&modes, "modes", "", "comma-separated modes session/new offers")
	fs.Var(&configOpts, "config-option", "ID=V1|V2: a select config option session/new offers (repeatable)")
	fs.StringVar(&cfg.record, "record", "", "append one JSON line per event to this file")
	fs.StringVar(&cfg.sessionID, "session-id", "", "session id to answer (default random)")
	fs.BoolVar(&cfg.noSessionID, "no-session-id", false, "answer session/new without a sessionId")
	fs.IntVar(&cfg.protocol, "protocol-version", 1, "protocolVersion to answer")
	fs.StringVar(&cfg.crashOn, "crash-on", "", "exit 3 on receiving this method")
	fs.Var(&hangOn, "hang-on", "never answer this method (repeatable)")
	fs.IntVar(&cfg.stderrLines, "stderr-lines", 0, "numbered stderr lines to write at startup")
	fs.Var(&stderrText, "stderr", "text to write as it is to stderr at startup (repeatable)")
	fs.StringVar(&capabilities, "capabilities", `{"loadSession":false,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":false}}`,
		"the agentCapabilities JSON initialize answers")
	fs.StringVar(&mcpCaps, "mcp-capabilities", "", "comma-separated mcpCapabilities to advertise (http, sse, acp)")
	fs.StringVar(&promptCaps, "prompt-capabilities", "", "comma-separated promptCapabilities to advertise (image, audio, embeddedContext)")
	fs.BoolVar(&cfg.echoRequest, "echo-request", false, "answer with a JSON summary of the mcpServers and prompt blocks received first")
	fs.BoolVar(&cfg.garbage, "garbage", false, "write non-JSON lines before every message")
	fs.StringVar(&cfg.requireAuth, "require-auth", "", "auth method id required before session/new")
	fs.BoolVar(&cfg.promptAuthRequired, "prompt-auth-required", false, "fail every session/prompt with -32000 Authentication required")
	fs.DurationVar(&cfg.promptDelay, "prompt-delay", 0, "wait before answering a prompt")
	fs.BoolVar(&cfg.promptHang, "prompt-hang", false, "never answer a prompt unless cancelled")
	fs.BoolVar(&cfg.ignoreCancel, "ignore-cancel", false, "ignore session/cancel (but record it)")
	fs.IntVar(&cfg.callModel, "call-model", 0, "model calls per turn, to $ANTHROPIC_BASE_URL/v1/messages with $ANTHROPIC_API_KEY (model.go)")
	fs.BoolVar(&cfg.streamModel, "stream-model", false, "ask -call-model's answers as event streams (model.go)")
	fs.IntVar(&cfg.usageTokens, "usage-tokens", 0, "total tokens the prompt answer's usage reports")
	fs.Float64Var(&cfg.usageCost, "usage-cost", 0, "cost per turn that a usage_update reports, cumulatively")
	fs.StringVar(&cfg.usageCurrency, "usage-currency", "USD", "the currency of -usage-cost")
	fs.Var(&permission, "permission", "KIND:TITLE of a tool call to ask permission for (repeatable)")
	fs.Var(&permissionJSON, "permission-json", "the params of a permission request to ask, as JSON (repeatable)")
	fs.StringVar(&agentInfo, "agent-info", "", "the agentInfo JSON initialize answers")
	fs.StringVar(&usageJSON, "usage-json", "", "the prompt answer's usage, as JSON given as it is")
	fs.Var(&updateJSON, "update-json", `a session update sent at the start of each turn as given ({"sessionUpdate": KIND, ...}), as JSON (repeatable)`)
	fs.StringVar(&usageUpdate, "usage-update-json", "", "the fields of a usage_update sent at the start of each turn, as JSON")
	fs.Var(&unasked, "unasked", "KIND:TITLE of a tool call run without asking (repeatable)")
	fs.Var(&unaskedFailed, "unasked-failed", "KIND:TITLE of a tool call run without asking that fails (repeatable)")
	fs.BoolVar(&cfg.announceFirst, "announce-first", false, "announce each -permission call in_progress before asking")
	fs.StringVar(&cfg.switchMode, "switch-mode", "", "switch to this mode at the start of a turn")
	fs.StringVar(&cfg.switchOption, "switch-option", "", "ID=VALUE: set this config option at the start of a turn")
	fs.BoolVar(&cfg.refuseSetMode, "refuse-set-mode", false, "answer session/set_mode with an error")
	fs.StringVar(&cfg.systemError, "system-error", "", "report a failed model call with this text, as codex-acp does")
	fs.StringVar(&messageIDs, "message-ids", "", "comma-separated messageId of each chunk, in order")
	fs.StringVar(&permOptions, "perm-options", "allow_once,allow_always,reject_once,reject_always", "option kinds offered")
	fs.Var(&askClient, "ask-client", "a client method to call during the prompt (repeatable)")
	fs.Var(&tries, "try", "KIND:ARG: an action to try during the prompt, its outcome added to the output (repeatable)")
	fs.BoolVar(&cfg.exitAfterSessionNew, "exit-after-session-new", false, "exit 0 after answering session/new")
	fs.BoolVar(&cfg.exitMidPrompt, "exit-mid-prompt", false, `send "partial" then exit 1 during the prompt`)
	fs.DurationVar(&cfg.eofFlush, "eof-flush", 0, "on stdin EOF, wait this long before exiting")
	fs.BoolVar(&cfg.ignoreEOF, "ignore-eof", false, "keep running after stdin EOF")
	fs.BoolVar(&cfg.exitOnClose, "exit-on-close", false, "exit 0 once session/close is answered")
	fs.BoolVar(&cfg.trapTerm, "trap-term", false, "ignore SIGTERM")
	fs.BoolVar(&cfg.grandchild, "grandchild", false, "spawn a sleeper in the process group")
	fs.BoolVar(&cfg.setsidGrandchild, "setsid-grandchild", false, "spawn a sleeper that calls setsid")
	fs.BoolVar(&cfg.daemonGrandchild, "daemon-grandchild", false, "double-fork a setsid sleeper")
	fs.DurationVar(&cfg.lifetime, "lifetime", 10*time.Minute, "exit 124 after this long (leak guard)")
	fs.BoolVar(&cfg.sleep, "sleep", false, "helper mode: sleep until killed")
	fs.BoolVar(&cfg.spawnSetsidAndExit, "spawn-setsid-and-exit", false, "helper mode: spawn a setsid sleeper, record it, exit")
	fs.Var(&turnEndSpawn, "turn-end-spawn", "setsid|daemon|storm|refork|sh: descendants started right after a prompt's answer (repeatable)")
	fs.StringVar(&cfg.sleeperHow, "sleeper-how", "", "helper mode -sleep: record itself as a grandchild started this way")
	fs.IntVar(&cfg.refork, "refork", -1, "helper mode: a refork daemon with this many generations to go")
	addStrayFlags(fs, &cfg.stray)
	addBoundsFlags(fs, &cfg.bounds)

	defer func() {
		if modes != "" {
			cfg.modes = strings.Split(modes, ",")
		}
		cfg.configOpts = configOpts
	}()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg.stderrText = stderrText
	for _, how := range turnEndSpawn {
		if !slices.Contains(turnEndSpawnKinds, how) {
			return nil, fmt.Errorf("-turn-end-spawn %q: want one of %s", how, strings.Join(turnEndSpawnKinds, ", "))
		}
	}
	cfg.turnEndSpawn = turnEndSpawn
	if !json.Valid([]byte(capabilities)) {
		return nil, fmt.Errorf("-capabilities %q: not JSON", capabilities)
	}
	cfg.capabilities = json.RawMessage(capabilities)
	if mcpCaps != "" || promptCaps != "" {
		caps, err := withCapabilities(cfg.capabilities, map[string]string{"mcpCapabilities": mcpCaps, "promptCapabilities": promptCaps})
		if err != nil {
			return nil, err
		}
		cfg.capabilities = caps
	}
	cfg.chunks = chunk
	if chunks != "" {
		cfg.chunks = append(cfg.chunks, strings.Split(chunks, ",")...)
	}
	if len(cfg.chunks) == 0 && !cfg.noChunks {
		cfg.chunks = []string{"Hello, ", "world"}
	}
	if cfg.noChunks {
		cfg.chunks = nil
	}
	cfg.answers = answer
	cfg.hangOn = hangOn
	cfg.askClient = askClient
	for _, action := range tries {
		if err := checkTry(action); err != nil {
			return nil, err
		}
	}
	cfg.tries = tries
	if messageIDs != "" {
		cfg.messageIDs = strings.Split(messageIDs, ",")
	}
	for i, p := range append(append([]string(nil), unasked...), unaskedFailed...) {
		kind, title, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("-unasked %q: want KIND:TITLE", p)
		}
		cfg.unasked = append(cfg.unasked, toolRequest{kind: kind, title: title, failed: i >= len(unasked)})
	}
	for _, p := range permission {
		kind, title, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("-permission %q: want KIND:TITLE", p)
		}
		cfg.permissions = append(cfg.permissions, toolRequest{kind: kind, title: title})
	}
	for i, p := range permissionJSON {
		var params map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p), &params); err != nil {
			return nil, fmt.Errorf("-permission-json %q: want a JSON object: %v", p, err)
		}
		cfg.permissions = append(cfg.permissions, toolRequest{kind: "json", title: fmt.Sprint(i + 1), raw: json.RawMessage(p)})
	}
	for _, u := range updateJSON {
		if !json.Valid([]byte(u)) {
			return nil, fmt.Errorf("-update-json %q: not JSON", u)
		}
		cfg.updates = append(cfg.updates, json.RawMessage(u))
	}
	for name, v := range map[string]string{"-usage-json": usageJSON, "-usage-update-json": usageUpdate, "-agent-info": agentInfo} {
		if v != "" && !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("%s %q: not JSON", name, v)
		}
	}
	if usageJSON != "" {
		cfg.usageJSON = json.RawMessage(usageJSON)
	}
	if agentInfo != "" {
		cfg.agentInfo = json.RawMessage(agentInfo)
	}
	if usageUpdate != "" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(usageUpdate), &fields); err != nil {
			return nil, fmt.Errorf("-usage-update-json %q: want a JSON object", usageUpdate)
		}
		cfg.usageUpdate = json.RawMessage(usageUpdate)
	}
	for _, kind := range strings.Split(permOptions, ",") {
		if kind = strings.TrimSpace(kind); kind != "" {
			cfg.permOptions = append(cfg.permOptions, kind)
		}
	}
	return cfg, nil
}

// withCapabilities sets, in the agentCapabilities object caps, each group's listed
// capabilities (comma-separated names) to true; a group given as "" is left as it is.
func withCapabilities(caps json.RawMessage, groups map[string]string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(caps, &m); err != nil || m == nil {
		return nil, fmt.Errorf("-capabilities %q: not a JSON object", caps)
	}
	for group, list := range groups {
		if list == "" {
			continue
		}
		g, _ := m[group].(map[string]any)
		if g == nil {
			g = map[string]any{}
		}
		for _, name := range strings.Split(list, ",") {
			if name = strings.TrimSpace(name); name != "" {
				g[name] = true
			}
		}
		m[group] = g
	}
	return json.Marshal(m)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(2)
	}
	switch {
	case cfg.sleep:
		sleeper(cfg)
	case cfg.spawnSetsidAndExit:
		spawnSetsidAndExit(cfg)
	case cfg.refork >= 0:
		reforkDaemon(cfg)
	default:
		runAgent(cfg)
	}
}

// runAgent is the agent proper: record the start, set up signals and descendants, serve stdin
// until EOF, then apply the EOF behaviour.
func runAgent(cfg *config) {
	rec, err := openRecorder(cfg.record)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(2)
	}
	handleSignals(cfg, rec)
	go exitAfter(cfg.lifetime, rec)
	rec.start()
	writeStderrLines(cfg.stderrLines)
	for _, text := range cfg.stderrText {
		_, _ = os.Stderr.WriteString(text)
	}
	spawnDescendants(cfg, rec)

	a := newAgent(cfg, rec, os.Stdout)
	a.writeBanner()
	a.serve(os.Stdin)
	a.strayOnEOF()
	onEOF(cfg, rec)
}
