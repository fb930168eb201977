package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// agent answers the client's messages as its config scripts.
type agent struct {
	cfg  *config
	rec  *recorder
	wire *wire

	mu            sync.Mutex
	authenticated bool
	cwd           string             // from the last session/new
	mcpServers    json.RawMessage    // from the last session/new, as sent
	turns         map[*turn]struct{} // prompts in flight
	costTurns     map[string]int     // per session, the turns that reported a cost (-usage-cost)
	prompts       int                // session/prompt requests received
	// modeSet hears of each session/set_mode (-switch-mode waits for one),
	// optionSet of each session/set_config_option (-switch-option).
	modeSet, optionSet chan struct{}
	// sessions are the ids of the sessions opened (new, fork), in order (stray.go).
	sessions []string
}

// turn is one session/prompt in flight.
type turn struct {
	id        json.RawMessage
	sessionID string
	n         int             // the agent's nth prompt, from 1
	params    json.RawMessage // the session/prompt request's
	cancelled chan struct{}   // closed by a session/cancel that is not ignored
	once      sync.Once
}

func (t *turn) cancel() { t.once.Do(func() { close(t.cancelled) }) }

// sleep waits d, or until the turn is cancelled.
func (t *turn) sleep(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.cancelled:
	}
}

func (t *turn) isCancelled() bool {
	select {
	case <-t.cancelled:
		return true
	default:
		return false
	}
}

func newAgent(cfg *config, rec *recorder, stdout io.Writer) *agent {
	return &agent{cfg: cfg, rec: rec, wire: newWire(stdout, cfg.garbage, rec), turns: make(map[*turn]struct{}), modeSet: make(chan struct{}, 1), optionSet: make(chan struct{}, 1)}
}

// serve handles stdin until EOF. Requests are answered on the reader goroutine, except prompts,
// which run on their own so that permission answers and cancels can still be read.
func (a *agent) serve(stdin io.Reader) {
	readMessages(stdin, func(m message) {
		switch {
		case m.Method == "" && len(m.ID) > 0:
			a.wire.deliver(m)
		case m.Method != "" && len(m.ID) > 0:
			a.request(m)
		case m.Method != "":
			a.notification(m)
		}
	})
}

func (a *agent) request(m message) {
	if m.Method == a.cfg.crashOn {
		crash(a.rec, m.Method)
	}
	if slices.Contains(a.cfg.hangOn, m.Method) {
		a.rec.event("hang", map[string]any{"method": m.Method, "params": m.Params})
		return
	}
	switch m.Method {
	case "initialize":
		a.initialize(m)
	case "authenticate":
		a.authenticate(m)
	case "session/new":
		a.newSession(m)
	case "session/set_mode", "session/set_config_option":
		a.rec.event(strings.TrimPrefix(m.Method, "session/"), map[string]any{"params": m.Params})
		if m.Method == "session/set_mode" && a.cfg.refuseSetMode {
			a.wire.fail(m.ID, -32602, "this agent keeps its mode", nil)
			return
		}
		a.wire.result(m.ID, map[string]any{})
		set := a.modeSet
		if m.Method == "session/set_config_option" {
			set = a.optionSet
		}
		select {
		case set <- struct{}{}:
		default:
		}
	case "session/fork":
		a.fork(m)
	case "session/close":
		a.closeSession(m)
	case "session/prompt":
		a.rec.event("prompt", map[string]any{"params": m.Params})
		if a.cfg.promptAuthRequired {
			a.wire.fail(m.ID, -32000, "Authentication required", nil)
			return
		}
		// The turn is registered before the next message is read, so that a session/cancel
		// right behind the prompt finds it.
		go a.prompt(a.beginTurn(m))
	default:
		a.wire.fail(m.ID, -32601, "Method not found", map[string]any{"method": m.Method})
	}
}

func (a *agent) notification(m message) {
	if m.Method != "session/cancel" {
		return // notifications an agent does not know are ignored
	}
	a.rec.event("cancel", map[string]any{"params": m.Params})
	if a.cfg.ignoreCancel {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.mu.Lock()
	defer a.mu.Unlock()
	for t := range a.turns {
		if t.sessionID == p.SessionID {
			t.cancel()
		}
	}
}

func (a *agent) initialize(m message) {
	a.rec.event("initialize", map[string]any{"params": m.Params})
	authMethods := []any{}
	if a.cfg.requireAuth != "" {
		authMethods = append(authMethods, map[string]any{
			"id":          a.cfg.requireAuth,
			"name":        "Test login",
			"description": "testagent requires authenticate with this method before session/new",
		})
	}
	var info any = map[string]any{"name": "testagent", "version": "0.0.0"}
	if a.cfg.agentInfo != nil {
		info = a.cfg.agentInfo
	}
	a.wire.result(m.ID, map[string]any{
		"protocolVersion":   a.cfg.protocol,
		"agentCapabilities": a.cfg.capabilities,
		"agentInfo":         info,
		"authMethods":       authMethods,
	})
}

func (a *agent) authenticate(m message) {
	a.rec.event("authenticate", map[string]any{"params": m.Params})
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if a.cfg.requireAuth != "" && p.MethodID != a.cfg.requireAuth {
		a.wire.fail(m.ID, -32602, "Invalid params", map[string]any{"error": fmt.Sprintf("unknown auth method %q", p.MethodID)})
		return
	}
	a.mu.Lock()
	a.authenticated = true
	a.mu.Unlock()
	a.wire.result(m.ID, map[string]any{})
}

func (a *agent) newSession(m message) {
	var p struct {
		Cwd        string          `json:"cwd"`
		McpServers json.RawMessage `json:"mcpServers"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.mu.Lock()
	authenticated := a.authenticated
	a.cwd = p.Cwd
	a.mcpServers = p.McpServers
	a.mu.Unlock()

	if a.cfg.requireAuth != "" && !authenticated {
		a.rec.event("session_new", map[string]any{"params": m.Params, "session_id": "", "error": "auth required"})
		a.wire.fail(m.ID, -32000, "Authentication required", nil)
		return
	}
	id := a.cfg.sessionID
	if id == "" {
		id = "ta-" + randomHex()
	}
	if a.cfg.noSessionID {
		id = ""
	}
	a.rec.event("session_new", map[string]any{"params": m.Params, "session_id": id})
	res := map[string]any{}
	if id != "" {
		res["sessionId"] = id
	}
	if len(a.cfg.modes) > 0 {
		var modes []any
		for _, m := range a.cfg.modes {
			modes = append(modes, map[string]any{"id": m, "name": m})
		}
		res["modes"] = map[string]any{"currentModeId": a.cfg.modes[0], "availableModes": modes}
	}
	if opts := a.configOptions(nil); len(opts) > 0 {
		res["configOptions"] = opts
	}
	if a.answerSessionNew(m, id, res) {
		return
	}
	a.wire.result(m.ID, res)
	if a.cfg.exitAfterSessionNew {
		os.Exit(0)
	}
}

func (a *agent) beginTurn(m message) *turn {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	t := &turn{id: m.ID, sessionID: p.SessionID, cancelled: make(chan struct{}), params: m.Params}
	a.mu.Lock()
	a.prompts++
	t.n = a.prompts
	a.turns[t] = struct{}{}
	a.mu.Unlock()
	return t
}

// prompt plays one turn: wait, maybe die, ask permissions, ask the client, stream the chunks.
// A session/cancel for its session (unless ignored) ends it at once with stop reason cancelled.
func (a *agent) prompt(t *turn) {
	defer func() {
		a.mu.Lock()
		delete(a.turns, t)
		a.mu.Unlock()
	}()

	a.writeStdoutLines()
	if a.cfg.usageCost > 0 {
		a.reportCost(t.sessionID)
	}
	if a.cfg.usageUpdate != nil {
		a.reportUsageAsGiven(t.sessionID)
	}
	for _, u := range a.cfg.updates {
		a.wire.notify("session/update", map[string]any{"sessionId": t.sessionID, "update": u})
	}
	if !a.waitBeforeAnswering(t) {
		a.endTurn(t, "cancelled")
		return
	}
	if a.cfg.echoRequest {
		a.chunk(t.sessionID, a.requestSummary(t)+"\n")
	}
	if a.cfg.exitMidPrompt {
		a.chunk(t.sessionID, "partial")
		fmt.Fprintln(os.Stderr, "testagent: exiting mid-prompt")
		os.Exit(1)
	}
	if !a.switchAlone(t) {
		a.endTurn(t, "cancelled")
		return
	}
	for i, tool := range a.cfg.unasked {
		id := fmt.Sprintf("unasked_%d", i+1)
		call := map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "kind": tool.kind, "title": tool.title,
			"status": "pending", "rawInput": map[string]any{"command": tool.title}}
		a.update(t.sessionID, call)
		a.update(t.sessionID, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress"})
		status := "completed"
		if tool.failed {
			status = "failed"
		}
		a.update(t.sessionID, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status})
		a.chunk(t.sessionID, fmt.Sprintf("ran %s %s unasked\n", tool.kind, tool.title))
	}
	for i, tool := range a.cfg.permissions {
		if a.cfg.announceFirst {
			// As codex-acp announces a patch: in progress before it asks.
			a.update(t.sessionID, map[string]any{"sessionUpdate": "tool_call", "toolCallId": fmt.Sprintf("call_%d", i+1),
				"kind": tool.kind, "title": tool.title, "status": "in_progress", "rawInput": map[string]any{"command": tool.title}})
		}
		outcome, ok := a.askPermission(t, i+1, tool)
		if ok && a.cfg.announceFirst {
			a.update(t.sessionID, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": fmt.Sprintf("call_%d", i+1), "status": "completed"})
		}
		if !ok {
			a.endTurn(t, "cancelled")
			return
		}
		a.chunk(t.sessionID, fmt.Sprintf("permission %s %s: %s\n", tool.kind, tool.title, outcome))
	}
	if !a.askBounds(t) {
		a.endTurn(t, "cancelled")
		return
	}
	for _, method := range a.cfg.askClient {
		said, ok := a.askClient(t, method)
		if !ok {
			a.endTurn(t, "cancelled")
			return
		}
		a.chunk(t.sessionID, "client said "+said+"\n")
	}
	a.callModel(t)
	for _, action := range a.cfg.tries {
		if t.isCancelled() {
			a.endTurn(t, "cancelled")
			return
		}
		line, ok := try(action)
		a.rec.event("try", map[string]any{"action": action, "ok": ok, "line": strings.TrimSuffix(line, "\n")})
		a.chunk(t.sessionID, line)
	}
	if a.cfg.flood > 0 {
		text := strings.Repeat("x", max(a.cfg.floodSize, 1))
		for range a.cfg.flood {
			if t.isCancelled() {
				a.endTurn(t, "cancelled")
				return
			}
			a.chunk(t.sessionID, text)
		}
	}
	for i, text := range a.chunks(t) {
		if a.cfg.noise {
			a.noise(t.sessionID, i)
		}
		if i > 0 && a.cfg.chunkEvery > 0 {
			t.sleep(a.cfg.chunkEvery)
		}
		if t.isCancelled() {
			a.endTurn(t, "cancelled")
			return
		}
		if i < len(a.cfg.messageIDs) {
			a.update(t.sessionID, map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": a.cfg.messageIDs[i],
				"content": map[string]any{"type": "text", "text": text}})
			continue
		}
		a.chunk(t.sessionID, text)
	}
	if a.cfg.systemError != "" {
		// As codex-acp 2.6 reports a failed model call: the thread's status,
		// then the error's words as a message, then end_turn.
		a.update(t.sessionID, map[string]any{"sessionUpdate": "session_info_update",
			"_meta": map[string]any{"codex": map[string]any{"threadStatus": map[string]any{"type": "systemError"}}}})
		a.update(t.sessionID, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "sys", "title": "x", "kind": "other", "status": "completed"})
		a.chunk(t.sessionID, a.cfg.systemError)
	}
	if a.cfg.noise {
		a.noise(t.sessionID, len(a.cfg.chunks))
	}
	if t.isCancelled() {
		a.endTurn(t, "cancelled")
		return
	}
	a.endTurn(t, a.cfg.stop)
}

// chunks are the message chunks of a turn's answer: its -answer, else -chunk.
func (a *agent) chunks(t *turn) []string {
	if n := len(a.cfg.answers); n > 0 {
		return []string{a.cfg.answers[min(t.n, n)-1]}
	}
	return a.cfg.chunks
}

// waitBeforeAnswering applies -prompt-delay and -prompt-hang; false means the turn was
// cancelled while waiting.
func (a *agent) waitBeforeAnswering(t *turn) bool {
	switch {
	case a.cfg.promptHang:
		<-t.cancelled // with -ignore-cancel, never
		return false
	case a.cfg.promptDelay > 0:
		timer := time.NewTimer(a.cfg.promptDelay)
		defer timer.Stop()
		select {
		case <-timer.C:
			return true
		case <-t.cancelled:
			return false
		}
	}
	return !t.isCancelled()
}

func (a *agent) endTurn(t *turn, stopReason string) {
	answer := map[string]any{"stopReason": stopReason}
	if n := a.cfg.usageTokens; n > 0 {
		answer["usage"] = map[string]any{"inputTokens": n - n/4, "outputTokens": n / 4, "totalTokens": n}
	}
	if a.cfg.usageJSON != nil {
		answer["usage"] = a.cfg.usageJSON
	}
	a.wire.result(t.id, answer)
	spawnAtTurnEnd(a.cfg, a.rec)
}

// reportUsageAsGiven sends -usage-update-json's usage_update, its fields
// as given.
func (a *agent) reportUsageAsGiven(sessionID string) {
	var fields map[string]json.RawMessage
	json.Unmarshal(a.cfg.usageUpdate, &fields) // checked by parseFlags
	update := map[string]any{"sessionUpdate": "usage_update"}
	for k, v := range fields {
		update[k] = v
	}
	a.update(sessionID, update)
}

// reportCost sends -usage-cost's usage_update: the session's cumulative
// cost, -usage-cost more for each of its turns, and 1000 tokens per turn
// in a context of 200000.
func (a *agent) reportCost(sessionID string) {
	a.mu.Lock()
	if a.costTurns == nil {
		a.costTurns = map[string]int{}
	}
	a.costTurns[sessionID]++
	k := a.costTurns[sessionID]
	a.mu.Unlock()
	a.update(sessionID, map[string]any{
		"sessionUpdate": "usage_update", "used": 1000 * k, "size": 200000,
		"cost": map[string]any{"amount": a.cfg.usageCost * float64(k), "currency": a.cfg.usageCurrency},
	})
}

// askPermission asks session/request_permission for one -permission tool call and returns
// the outcome for the output; false when the turn was cancelled before the client answered.
func (a *agent) askPermission(t *turn, n int, tool toolRequest) (string, bool) {
	callID := fmt.Sprintf("call_%d", n)
	toolCall := map[string]any{
		"toolCallId": callID,
		"kind":       tool.kind,
		"title":      tool.title,
		"status":     "pending",
		"rawInput":   map[string]any{"command": tool.title},
	}
	if strings.HasPrefix(tool.title, "/") {
		toolCall["locations"] = []any{map[string]any{"path": tool.title}}
	}
	options := []any{}
	for _, kind := range a.cfg.permOptions {
		options = append(options, map[string]any{
			"optionId": "opt-" + strings.ReplaceAll(kind, "_", "-"),
			"name":     optionName(kind),
			"kind":     kind,
		})
	}
	params := map[string]any{"sessionId": a.permissionSession(t), "toolCall": toolCall, "options": options}
	if tool.raw != nil {
		var given map[string]json.RawMessage
		json.Unmarshal(tool.raw, &given) // checked by parseFlags
		params = map[string]any{"sessionId": t.sessionID}
		for k, v := range given {
			params[k] = v
		}
		var tc struct {
			ID string `json:"toolCallId"`
		}
		json.Unmarshal(given["toolCall"], &tc)
		callID = tc.ID
	}
	answered := a.wire.request("session/request_permission", params,
		func(resp message) {
			e := map[string]any{"tool_call_id": callID}
			if resp.Error != nil {
				e["error"] = resp.Error
			} else {
				e["result"] = resp.Result
			}
			a.rec.event("permission_answer", e)
		})
	select {
	case resp := <-answered:
		return permissionOutcome(resp), true
	case <-t.cancelled:
		return "", false
	}
}

func permissionOutcome(resp message) string {
	if resp.Error != nil {
		return fmt.Sprintf("error %d", resp.Error.Code)
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		return "invalid answer"
	}
	switch r.Outcome.Outcome {
	case "selected":
		return r.Outcome.OptionID
	case "cancelled":
		return "cancelled"
	}
	return "invalid outcome " + r.Outcome.Outcome
}

func optionName(kind string) string {
	switch kind {
	case "allow_once":
		return "Allow once"
	case "allow_always":
		return "Always allow"
	case "reject_once":
		return "Reject once"
	case "reject_always":
		return "Always reject"
	}
	return "Option " + kind
}

// askClient calls a client method acpflow does not serve and returns what to say about the
// answer: the error code, or "ok"; false when the turn was cancelled first.
func (a *agent) askClient(t *turn, method string) (string, bool) {
	a.mu.Lock()
	cwd := a.cwd
	a.mu.Unlock()
	params := map[string]any{"sessionId": t.sessionID}
	switch {
	case strings.HasPrefix(method, "fs/"):
		params["path"] = filepath.Join(cwd, "README.md")
		if method == "fs/write_text_file" {
			params["content"] = "written by testagent\n"
		}
	case method == "terminal/create":
		params["command"] = "echo"
		params["args"] = []string{"hello"}
	case strings.HasPrefix(method, "terminal/"):
		params["terminalId"] = "term-1"
	}
	answered := a.wire.request(method, params, func(resp message) {
		e := map[string]any{"method": method, "code": 0}
		if resp.Error != nil {
			e["code"] = resp.Error.Code
		} else {
			e["result"] = resp.Result
		}
		a.rec.event("client_error", e)
	})
	select {
	case resp := <-answered:
		if resp.Error != nil {
			return fmt.Sprint(resp.Error.Code), true
		}
		return "ok", true
	case <-t.cancelled:
		return "", false
	}
}

// requestSummary is -echo-request's line: what the last session/new and this prompt carried, as
// JSON. Env and header values are left out (names only): this line becomes the output acpflow
// records, and a test proves acpflow records no such value.
func (a *agent) requestSummary(t *turn) string {
	a.mu.Lock()
	rawServers := a.mcpServers
	a.mu.Unlock()
	type server struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Command string   `json:"command,omitempty"`
		Args    []string `json:"args,omitempty"`
		Env     []string `json:"env,omitempty"`
		URL     string   `json:"url,omitempty"`
		Headers []string `json:"headers,omitempty"`
	}
	type named struct {
		Name string `json:"name"`
	}
	var sent []struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Env     []named  `json:"env"`
		URL     string   `json:"url"`
		Headers []named  `json:"headers"`
	}
	var servers []server // stays nil (null) when the client sent null or nothing
	if json.Unmarshal(rawServers, &sent) == nil && sent != nil {
		servers = []server{}
		for _, s := range sent {
			out := server{Name: s.Name, Type: s.Type, Command: s.Command, Args: s.Args, URL: s.URL}
			if out.Type == "" {
				out.Type = "stdio"
			}
			for _, e := range s.Env {
				out.Env = append(out.Env, e.Name)
			}
			for _, h := range s.Headers {
				out.Headers = append(out.Headers, h.Name)
			}
			servers = append(servers, out)
		}
	}
	type block struct {
		Type      string `json:"type"`
		URI       string `json:"uri,omitempty"`
		Name      string `json:"name,omitempty"`
		MimeType  string `json:"mimeType,omitempty"`
		Size      *int64 `json:"size,omitempty"`
		TextBytes *int   `json:"textBytes,omitempty"`
		DataBytes *int   `json:"dataBytes,omitempty"`
	}
	var p struct {
		Prompt []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			URI      string `json:"uri"`
			Name     string `json:"name"`
			MimeType string `json:"mimeType"`
			Size     *int64 `json:"size"`
			Data     string `json:"data"`
			Resource struct {
				URI      string `json:"uri"`
				MimeType string `json:"mimeType"`
				Text     string `json:"text"`
				Blob     string `json:"blob"`
			} `json:"resource"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(t.params, &p)
	blocks := []block{}
	for _, b := range p.Prompt {
		out := block{Type: b.Type, URI: b.URI, Name: b.Name, MimeType: b.MimeType, Size: b.Size}
		switch b.Type {
		case "text":
			n := len(b.Text)
			out.TextBytes = &n
		case "image", "audio":
			n := len(b.Data)
			out.DataBytes = &n
		case "resource":
			out.URI, out.MimeType = b.Resource.URI, b.Resource.MimeType
			n := len(b.Resource.Text)
			out.TextBytes = &n
		}
		blocks = append(blocks, out)
	}
	line, _ := json.Marshal(map[string]any{"mcpServers": servers, "prompt": blocks})
	return string(line)
}

func (a *agent) chunk(sessionID, text string) {
	a.update(sessionID, map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]any{"type": "text", "text": text},
	})
}

// noise sends every kind of update that a client must keep out of the output, the last one a
// message chunk for a session that is not the prompt's.
func (a *agent) noise(sessionID string, n int) {
	toolCallID := fmt.Sprintf("noise_%d", n)
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	for _, u := range []map[string]any{
		{"sessionUpdate": "agent_thought_chunk", "content": text("thinking...")},
		{"sessionUpdate": "tool_call", "toolCallId": toolCallID, "title": "NOISE tool call", "kind": "other", "status": "pending"},
		{"sessionUpdate": "tool_call_update", "toolCallId": toolCallID, "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": text("NOISE tool output")}}},
		{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": "NOISE plan", "priority": "medium", "status": "pending"}}},
		{"sessionUpdate": "current_mode_update", "currentModeId": "noise-mode"},
		{"sessionUpdate": "available_commands_update", "availableCommands": []any{}},
		{"sessionUpdate": "user_message_chunk", "content": text("NOISE user message")},
	} {
		a.update(sessionID, u)
	}
	a.chunk(sessionID+"-other", "LEAK")
}

func (a *agent) update(sessionID string, update map[string]any) {
	a.wire.notify("session/update", map[string]any{"sessionId": sessionID, "update": update})
}

// crash is -crash-on: a few lines of "stack" on stderr and exit 3, answering nothing.
func crash(rec *recorder, method string) {
	rec.event("crash", map[string]any{"method": method})
	fmt.Fprintf(os.Stderr, "testagent: crashing on %s\n", method)
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(os.Stderr, "testagent: crash detail %d\n", i)
	}
	os.Exit(3)
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// configOptions are the -config-option options as session/new offers them,
// with the values in current (by id) instead of each one's first.
func (a *agent) configOptions(current map[string]string) []any {
	var out []any
	for _, o := range a.cfg.configOpts {
		optID, values, _ := strings.Cut(o, "=")
		optID, category, _ := strings.Cut(optID, ":")
		var opts []any
		for _, v := range strings.Split(values, "|") {
			opts = append(opts, map[string]any{"value": v, "name": v})
		}
		value, set := current[optID]
		if !set {
			value = strings.Split(values, "|")[0]
		}
		opt := map[string]any{"type": "select", "id": optID, "name": optID, "currentValue": value, "options": opts}
		if optID == "mode" {
			category = "mode" // as opencode keeps its mode
		}
		if category != "" {
			opt["category"] = category
		}
		out = append(out, opt)
	}
	return out
}

// switchAlone plays -switch-mode and -switch-option: the agent changes its
// mode or a config option on its own, then waits up to 2 s for the client
// to set it back. False when the turn was cancelled meanwhile.
func (a *agent) switchAlone(t *turn) bool {
	wait := func(set chan struct{}, said string) bool {
		select {
		case <-set:
			a.chunk(t.sessionID, said)
		case <-time.After(2 * time.Second):
		case <-t.cancelled:
			return false
		}
		return true
	}
	if a.cfg.switchMode != "" {
		a.update(t.sessionID, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": a.cfg.switchMode})
		if !wait(a.modeSet, "mode set back\n") {
			return false
		}
	}
	if id, value, ok := strings.Cut(a.cfg.switchOption, "="); ok {
		a.update(t.sessionID, map[string]any{"sessionUpdate": "config_option_update", "configOptions": a.configOptions(map[string]string{id: value})})
		if !wait(a.optionSet, "option set back\n") {
			return false
		}
	}
	return true
}
