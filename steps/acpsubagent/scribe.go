package acpsubagent

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/transcript"
)

// minSecret is the shortest value a transcript is scrubbed of: shorter
// ones ("1", "true", "dev") are words of every message, and scrubbing them
// would garble what it keeps without hiding anything.
const minSecret = 6

// redacted stands for a secret in a transcript.
const redacted = "[redacted]"

// scribe keeps one attempt's transcript (docs/transcripts.md): every line
// that went between acpflow and the agent while the attempt held the
// process, both ways, bounded by transcript.MaxBytes, with every secret
// the attempt knows scrubbed from its strings.
type scribe struct {
	begin   time.Time
	secrets []string // longest first, so a value inside another goes with it
	// session, once set, filters lines that name another session: a
	// process that serves parallel forks serves each its own.
	mu      sync.Mutex
	session string
	t       transcript.Step
	size    int
}

// newScribe starts a transcript of an attempt by agent, scrubbing secrets.
func newScribe(agent string, secrets []string) *scribe {
	s := &scribe{begin: time.Now(), t: transcript.Step{Agent: agent, Messages: []transcript.Message{}}}
	s.addSecrets(secrets)
	return s
}

// addSecrets adds values to scrub, from now on.
func (s *scribe) addSecrets(values []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) >= minSecret && !slices.Contains(s.secrets, v) {
			s.secrets = append(s.secrets, v)
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
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
	msg := s.scrub(line)
	if s.size+len(msg) > transcript.MaxBytes {
		s.t.Truncated = true
		return
	}
	s.size += len(msg)
	s.t.Messages = append(s.t.Messages, transcript.Message{Dir: dir, AtMS: at, Msg: msg})
}

// scrub returns line with every secret in its strings replaced; a line
// that is not JSON is kept as a JSON string, scrubbed too.
func (s *scribe) scrub(line []byte) json.RawMessage {
	if !json.Valid(line) {
		b, _ := json.Marshal(s.scrubString(string(line)))
		return b
	}
	if len(s.secrets) == 0 || !s.mayHold(line) {
		return append(json.RawMessage(nil), line...)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		b, _ := json.Marshal(s.scrubString(string(line)))
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s.walk(v))
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// mayHold is a quick test: could a secret be in line at all? A secret
// with characters JSON escapes is assumed to be.
func (s *scribe) mayHold(line []byte) bool {
	for _, v := range s.secrets {
		if bytes.Contains(line, []byte(v)) || strings.ContainsAny(v, "\"\\<>&\n\t") {
			return true
		}
	}
	return false
}

func (s *scribe) walk(v any) any {
	switch x := v.(type) {
	case string:
		return s.scrubString(x)
	case []any:
		for i := range x {
			x[i] = s.walk(x[i])
		}
	case map[string]any:
		for k, e := range x {
			x[k] = s.walk(e)
		}
	}
	return v
}

func (s *scribe) scrubString(str string) string {
	for _, v := range s.secrets {
		str = strings.ReplaceAll(str, v, redacted)
	}
	return str
}

// spawned keeps the env decision of the attempt's spawn (names only), its
// reason to refuse scrubbed like any line.
func (s *scribe) spawned(sp *transcript.Spawn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp.Deny = s.scrubString(sp.Deny)
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
	return &t
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
