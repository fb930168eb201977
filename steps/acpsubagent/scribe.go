package acpsubagent

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps/redact"
)

// scribe keeps one attempt's transcript (docs/transcripts.md): every line
// that went between acpflow and the agent while the attempt held the
// process, both ways, bounded by transcript.MaxBytes, with every secret
// the attempt knows scrubbed from its strings. Its Scrubber scrubs what
// else the attempt records the same way (redact.go), as a shell step's
// does.
type scribe struct {
	*redact.Scrubber
	begin time.Time
	// session, once set, filters lines that name another session: a
	// process that serves parallel forks serves each its own.
	mu      sync.Mutex
	session string
	t       transcript.Step
	size    int
	// modelSize is the JSON of the model exchanges kept (t.Model).
	modelSize int
}

// newScribe starts a transcript of an attempt by agent, scrubbing secrets
// but never touching paths (see redact.Scrubber).
func newScribe(agent string, secrets []string, paths ...string) *scribe {
	return &scribe{Scrubber: redact.New(secrets, paths...), begin: time.Now(),
		t: transcript.Step{Agent: agent, Messages: []transcript.Message{}}}
}

// follow keeps only the lines of session id (and those naming none).
func (s *scribe) follow(id string) {
	s.mu.Lock()
	s.session = id
	s.mu.Unlock()
}

// add keeps one line.
func (s *scribe) add(dir string, line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return
	}
	at := time.Since(s.begin).Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t.Truncated {
		return
	}
	if s.session != "" && !namesSession(line, s.session) {
		return
	}
	msg := s.Line(line)
	if s.size+len(msg) > transcript.MaxBytes {
		s.t.Truncated = true
		return
	}
	s.size += len(msg)
	s.t.Messages = append(s.t.Messages, transcript.Message{Dir: dir, AtMS: at, Msg: msg})
}

// spawned keeps the env decision of the attempt's spawn (names only), its
// reason to refuse scrubbed like any line.
func (s *scribe) spawned(sp *transcript.Spawn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp.Deny = s.Text(sp.Deny)
	s.t.Spawn = sp
}

// hasSpawn reports whether the attempt asked the env policy.
func (s *scribe) hasSpawn() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Spawn != nil
}

// done returns the transcript.
func (s *scribe) done() *transcript.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.t
	if t.Model != nil {
		m := *t.Model
		m.Exchanges = slices.Clip(m.Exchanges)
		t.Model = &m
	}
	return &t
}

// recordModel starts keeping the attempt's model side: its gateway
// records (record: true). The agent's args are scrubbed like any line.
func (s *scribe) recordModel(m transcript.Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.Agent.Args = slices.Clone(m.Agent.Args)
	for i, a := range m.Agent.Args {
		m.Agent.Args[i] = s.Text(a)
	}
	m.Exchanges = []transcript.Exchange{}
	s.t.Model = &m
}

// modelSession keeps the session's mode and config in the model side, if
// one is kept: a replay sets them again.
func (s *scribe) modelSession(mode string, config map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t.Model == nil {
		return
	}
	s.t.Model.Agent.Mode, s.t.Model.Agent.Config = s.Text(mode), nil
	for k, v := range config {
		if s.t.Model.Agent.Config == nil {
			s.t.Model.Agent.Config = map[string]string{}
		}
		s.t.Model.Agent.Config[k] = s.Text(v)
	}
}

// exchange keeps one model exchange, its bodies scrubbed of the attempt's
// secrets (the gateway has removed the key and the placeholder), within
// transcript.MaxModelBytes: past it, none more and the model side is
// marked truncated.
func (s *scribe) exchange(x transcript.Exchange, started time.Time) {
	x.AtMS = max(started.Sub(s.begin).Milliseconds(), 0)
	x.Path = s.Text(x.Path)
	if s.MayHold(x.Request) {
		x.Request = transcript.Body(s.Text(string(x.Request)))
	}
	if s.MayHold(x.Response) {
		x.Response = transcript.Body(s.Text(string(x.Response)))
	}
	size := x.Size()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.t.Model
	if m == nil || m.Truncated {
		return
	}
	if s.modelSize+size > transcript.MaxModelBytes {
		m.Truncated = true
		return
	}
	s.modelSize += size
	m.Exchanges = append(m.Exchanges, x)
}

// namesSession reports whether line is for session id or names none: a
// cheap look for the sessionId member, decoded only when present.
func namesSession(line []byte, id string) bool {
	if !bytes.Contains(line, []byte(`"sessionId"`)) {
		return true
	}
	var m struct {
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Params.SessionID == "" {
		return true
	}
	return m.Params.SessionID == id
}
