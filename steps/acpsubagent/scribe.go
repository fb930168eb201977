package acpsubagent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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
// the attempt knows scrubbed from its strings. It scrubs what else the
// attempt records the same way (redact.go).
//
// # Notes
//
// A value that is, or is part of, or holds a path acpflow records (the
// workspace, the step's cwd) is never a secret: scrubbing OLDPWD=/home/me
// would turn every path of the workspace /home/me/ws into
// "[redacted]/ws", and `policy test` would judge them outside it.
type scribe struct {
	begin   time.Time
	secrets []string // longest first, so a value inside another goes with it
	// masks replace a whole string before the secrets are scrubbed: an
	// MCP server's url as sent, by the url with its templated parts
	// hidden (longest first).
	masks []mask
	// paths are the paths acpflow records, which no secret may touch.
	paths []string
	// session, once set, filters lines that name another session: a
	// process that serves parallel forks serves each its own.
	mu      sync.Mutex
	session string
	t       transcript.Step
	size    int
}

// mask is one string replaced by another wherever it appears.
type mask struct{ from, to string }

// newScribe starts a transcript of an attempt by agent, scrubbing secrets
// but never touching paths (see scribe).
func newScribe(agent string, secrets []string, paths ...string) *scribe {
	s := &scribe{begin: time.Now(), t: transcript.Step{Agent: agent, Messages: []transcript.Message{}}}
	s.keepPaths(paths...)
	s.addSecrets(secrets)
	return s
}

// keepPaths adds paths that acpflow records: no value that is part of one,
// or holds one, is scrubbed from now on. Call it before adding secrets.
func (s *scribe) keepPaths(paths ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range paths {
		if p != "" && !slices.Contains(s.paths, p) {
			s.paths = append(s.paths, p)
		}
	}
}

// touchesPath reports whether scrubbing v would change a recorded path,
// or a path below one: v is part of the path, or holds it.
func (s *scribe) touchesPath(v string) bool {
	for _, p := range s.paths {
		if strings.Contains(p, v) || (p != "/" && strings.Contains(v, p)) {
			return true
		}
	}
	return false
}

// localPaths reports whether v is an absolute path of this machine (its
// directory, not the root, exists), or a list of them (PATH, PYTHONPATH):
// a path to a secret (GOOGLE_APPLICATION_CREDENTIALS, SSH_AUTH_SOCK) is no
// secret, and scrubbed from a tool's location it would leave a relative
// path that `policy test` judges inside the cwd.
func localPaths(v string) bool {
	for _, p := range strings.Split(v, string(os.PathListSeparator)) {
		dir := filepath.Dir(p)
		if !filepath.IsAbs(p) || dir == "/" {
			return false
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// addSecrets adds values to scrub, from now on: those of minSecret
// characters or more that touch no recorded path and are no local path.
func (s *scribe) addSecrets(values []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) >= minSecret && !slices.Contains(s.secrets, v) && !s.touchesPath(v) && !localPaths(v) {
			s.secrets = append(s.secrets, v)
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
}

// addMask hides the templated parts of a string sent as pieces (each a
// literal, or what a ${{ }} produced): wherever the whole string appears,
// it becomes the string with each produced part "[redacted]", however
// short, unless it is empty or touches a recorded path.
func (s *scribe) addMask(pieces []piece) {
	var sent, shown strings.Builder
	for _, p := range pieces {
		sent.WriteString(p.text)
		s.mu.Lock()
		hide := p.templated && p.text != "" && !s.touchesPath(p.text)
		s.mu.Unlock()
		if hide {
			shown.WriteString(redacted)
		} else {
			shown.WriteString(p.text)
		}
	}
	m := mask{sent.String(), shown.String()}
	if m.from == m.to {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.masks, m) {
		s.masks = append(s.masks, m)
		slices.SortFunc(s.masks, func(a, b mask) int { return len(b.from) - len(a.from) })
	}
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
	if len(s.secrets) == 0 && len(s.masks) == 0 || !s.mayHold(line) {
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

// mayHold is a quick test: could a secret be in line at all? It looks
// for each value as written and as encoding/json escapes it (acpflow's own
// lines: & as \u0026); a value with characters that other encoders may
// escape otherwise (quotes, backslashes, control characters, non-ASCII)
// is assumed to be there.
func (s *scribe) mayHold(line []byte) bool {
	for _, v := range s.secrets {
		if inLine(line, v) {
			return true
		}
	}
	for _, m := range s.masks {
		if inLine(line, m.from) {
			return true
		}
	}
	return false
}

// inLine reports whether v may be in a JSON line (see mayHold).
func inLine(line []byte, v string) bool {
	if bytes.Contains(line, []byte(v)) {
		return true
	}
	for _, r := range v {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return true
		}
	}
	if strings.ContainsAny(v, "<>&") {
		b, _ := json.Marshal(v)
		return bytes.Contains(line, b[1:len(b)-1])
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
	for _, m := range s.masks {
		str = strings.ReplaceAll(str, m.from, m.to)
	}
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
