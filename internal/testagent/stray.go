package main

// Requests that no turn of the client's owns, and sessions that are not
// the step's own: what the client must answer and record although no
// prompt of its is running, and what it must refuse.
//
//	-stray-permission WHEN   ask session/request_permission for a tool call "execute stray WHEN"
//	                         outside any turn (repeatable): session/new (before answering it,
//	                         for the id about to be answered), session/fork (before answering
//	                         it, for the session forked), session/close (before answering it,
//	                         for the session closed), each waiting for the client's answer
//	                         before answering the request; eof (on stdin EOF, for the last
//	                         session opened, not waiting: no answer can come). Each answer is
//	                         recorded as a permission_answer of tool call "stray_WHEN"
//	-permission-session ID   the -permission requests name session ID instead of the turn's;
//	                         "previous" names the session this process opened before the
//	                         turn's (another step's, on a reused agent)
//	-fork-session-id ID      answer session/fork with session id ID ("parent": the id of the
//	                         session forked); default a new random "ta-fork-…". The client
//	                         sees session/fork only where -capabilities advertises it
//	                         ({"sessionCapabilities": {"fork": {}}})
//
// session/fork and session/close are served whatever -capabilities says,
// and recorded: {"event":"session_fork","params","session_id"},
// {"event":"session_close","params"}.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// strayScript is the part of the config this file reads.
type strayScript struct {
	at          strayWhen
	permSession string
	forkID      string
}

// strayWhen is the repeatable -stray-permission flag, checked as it is set.
type strayWhen []string

var strayMoments = []string{"session/new", "session/fork", "session/close", "eof"}

func (w *strayWhen) String() string { return strings.Join(*w, ",") }
func (w *strayWhen) Set(v string) error {
	if !slices.Contains(strayMoments, v) {
		return fmt.Errorf("want one of %s", strings.Join(strayMoments, ", "))
	}
	*w = append(*w, v)
	return nil
}

func addStrayFlags(fs *flag.FlagSet, s *strayScript) {
	fs.Var(&s.at, "stray-permission", "session/new|session/fork|session/close|eof: ask a permission outside any turn then (repeatable)")
	fs.StringVar(&s.permSession, "permission-session", "", `the session id -permission requests name ("previous": the session opened before the turn's)`)
	fs.StringVar(&s.forkID, "fork-session-id", "", `the session id session/fork answers ("parent": the session forked)`)
}

// opened notes a session the agent gave the client, in order.
func (a *agent) opened(id string) {
	a.mu.Lock()
	a.sessions = append(a.sessions, id)
	a.mu.Unlock()
}

// permissionSession is the session id a -permission request of turn t
// names.
func (a *agent) permissionSession(t *turn) string {
	switch s := a.cfg.stray.permSession; s {
	case "":
		return t.sessionID
	case "previous":
		a.mu.Lock()
		defer a.mu.Unlock()
		if i := slices.Index(a.sessions, t.sessionID); i > 0 {
			return a.sessions[i-1]
		}
		return "ta-no-previous-session"
	default:
		return s
	}
}

// strayAt asks the -stray-permission of moment when, for session, and
// waits for the answer (unless wait is false). It must not run on the
// reader goroutine when it waits: the answer comes through that.
func (a *agent) strayAt(when, session string, wait bool) {
	if !slices.Contains(a.cfg.stray.at, when) {
		return
	}
	callID := "stray_" + when
	toolCall := map[string]any{"toolCallId": callID, "kind": "execute", "title": "stray " + when,
		"status": "pending", "rawInput": map[string]any{"command": "stray " + when}}
	options := []any{
		map[string]any{"optionId": "opt-allow-once", "name": "Allow once", "kind": "allow_once"},
		map[string]any{"optionId": "opt-reject-once", "name": "Reject once", "kind": "reject_once"},
	}
	answered := a.wire.request("session/request_permission",
		map[string]any{"sessionId": session, "toolCall": toolCall, "options": options},
		func(resp message) {
			e := map[string]any{"tool_call_id": callID}
			if resp.Error != nil {
				e["error"] = resp.Error
			} else {
				e["result"] = resp.Result
			}
			a.rec.event("permission_answer", e)
		})
	if wait {
		<-answered
	}
}

// strayOnEOF is the eof moment: the client has closed stdin.
func (a *agent) strayOnEOF() {
	a.mu.Lock()
	last := ""
	if n := len(a.sessions); n > 0 {
		last = a.sessions[n-1]
	}
	a.mu.Unlock()
	a.strayAt("eof", last, false)
}

// fork answers session/fork with -fork-session-id.
func (a *agent) fork(m message) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	id := a.cfg.stray.forkID
	switch id {
	case "":
		id = "ta-fork-" + randomHex()
	case "parent":
		id = p.SessionID
	}
	a.rec.event("session_fork", map[string]any{"params": m.Params, "session_id": id})
	go func() {
		a.strayAt("session/fork", p.SessionID, true)
		a.opened(id)
		a.wire.result(m.ID, map[string]any{"sessionId": id})
	}()
}

// closeSession answers session/close.
func (a *agent) closeSession(m message) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.rec.event("session_close", map[string]any{"params": m.Params})
	go func() {
		a.strayAt("session/close", p.SessionID, true)
		a.wire.result(m.ID, map[string]any{})
		if a.cfg.exitOnClose {
			a.rec.event("exit_on_close", nil)
			os.Exit(0)
		}
	}()
}

// answerSessionNew notes the session and answers session/new; with
// -stray-permission session/new, on a goroutine of its own once the stray
// request is answered, and true is returned.
func (a *agent) answerSessionNew(m message, id string, res map[string]any) bool {
	a.opened(id)
	if !slices.Contains(a.cfg.stray.at, "session/new") {
		return false
	}
	go func() {
		a.strayAt("session/new", id, true)
		a.wire.result(m.ID, res)
	}()
	return true
}
