package redact

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Scrubber holds the secrets one attempt knows and scrubs them from what
// the attempt records. It is safe for concurrent use: an agent's lines,
// events and result are scrubbed from several goroutines.
//
// # Notes
//
// A value that is, or is part of, or holds a path acpflow records (the
// workspace, the step's cwd) is never a secret: scrubbing OLDPWD=/home/me
// would turn every path of the workspace /home/me/ws into
// "[redacted]/ws", and `policy test` would judge them outside it.
type Scrubber struct {
	mu      sync.Mutex
	secrets []string // longest first, so a value inside another goes with it
	// masks replace a whole string before the secrets are scrubbed: an
	// MCP server's url as sent, by the url with its templated parts
	// hidden (longest first).
	masks []mask
	// paths are the paths acpflow records, which no secret may touch.
	paths []string
}

// mask is one string replaced by another wherever it appears.
type mask struct{ from, to string }

// New is a Scrubber of secrets that never touches paths (see Scrubber).
func New(secrets []string, paths ...string) *Scrubber {
	s := &Scrubber{}
	s.KeepPaths(paths...)
	s.Add(secrets)
	return s
}

// KeepPaths adds paths that acpflow records: no value that is part of one,
// or holds one, is scrubbed from now on. Call it before adding secrets.
func (s *Scrubber) KeepPaths(paths ...string) {
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
func (s *Scrubber) touchesPath(v string) bool {
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

// Add adds values to scrub, from now on: those of MinSecret characters or
// more that touch no recorded path and are no local path.
func (s *Scrubber) Add(values []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) >= MinSecret && !slices.Contains(s.secrets, v) && !s.touchesPath(v) && !localPaths(v) {
			s.secrets = append(s.secrets, v)
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
}

// AddMask hides the templated parts of a string sent as pieces (each a
// literal, or what a ${{ }} produced): wherever the whole string appears,
// it becomes the string with each produced part "[redacted]", however
// short, unless it is empty or touches a recorded path.
func (s *Scrubber) AddMask(pieces []Piece) {
	var sent, shown strings.Builder
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pieces {
		sent.WriteString(p.Text)
		if p.Templated && p.Text != "" && !s.touchesPath(p.Text) {
			shown.WriteString(Redacted)
		} else {
			shown.WriteString(p.Text)
		}
	}
	m := mask{sent.String(), shown.String()}
	if m.from != m.to && !slices.Contains(s.masks, m) {
		s.masks = append(s.masks, m)
		slices.SortFunc(s.masks, func(a, b mask) int { return len(b.from) - len(a.from) })
	}
}

// Empty reports whether the scrubber knows nothing to scrub.
func (s *Scrubber) Empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.secrets) == 0 && len(s.masks) == 0
}

// Text scrubs one string.
func (s *Scrubber) Text(str string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrubString(str)
}

// Value scrubs every string inside v, a value decoded from JSON (changed
// in place).
func (s *Scrubber) Value(v any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walk(v)
}

// redactedError is an error whose words were scrubbed; it unwraps to the
// original, so that errors.Is and As still see the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Err is err with its words scrubbed.
func (s *Scrubber) Err(err error) error {
	if msg := s.Text(err.Error()); msg != err.Error() {
		return &redactedError{msg, err}
	}
	return err
}

// Result scrubs what an attempt hands to the engine: its output and final
// message, its value, its error, its stderr and its permission records.
func (s *Scrubber) Result(res *steps.Result) {
	if s.Empty() {
		return
	}
	res.Output, res.Final, res.Stderr = s.Text(res.Output), s.Text(res.Final), s.Text(res.Stderr)
	if res.JSON != nil {
		res.JSON = s.Value(res.JSON)
	}
	if res.Err != nil {
		res.Err = s.Err(res.Err)
	}
	for i := range res.Permissions {
		res.Permissions[i] = s.Permission(res.Permissions[i])
	}
}

// Permission scrubs what a permission record holds of the agent's words.
func (s *Scrubber) Permission(r policies.PermissionRecord) policies.PermissionRecord {
	r.Title, r.Command, r.Reason = s.cutText(r.Title), s.cutText(r.Command), s.Text(r.Reason)
	if r.Locations != nil {
		locs := make([]policies.ToolLocation, len(r.Locations))
		for i, l := range r.Locations {
			l.Path = s.cutText(l.Path)
			locs[i] = l
		}
		r.Locations = locs
	}
	return r
}

// CutMark follows the part of a text that a record kept when it cut the
// text short (an oversized permission request's, in acp-subagent):
// Permission looks for it.
const CutMark = "… (cut from "

// cutText scrubs a record's text that may have been cut (CutMark) before
// any scrubber saw it: a secret the cut went through is there only as its
// beginning, which scrubString cannot recognise, so an end of the kept
// part that begins a secret is scrubbed too.
func (s *Scrubber) cutText(str string) string {
	str = s.Text(str)
	head, tail, cut := strings.Cut(str, CutMark)
	if !cut {
		return str
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		for k := len(v) - 1; k > 0; k-- {
			if strings.HasSuffix(head, v[:k]) {
				head = head[:len(head)-k] + Redacted
				break
			}
		}
	}
	return head + CutMark + tail
}

// Line returns a JSON line with every secret in its strings replaced; a
// line that is not JSON is kept as a JSON string, scrubbed too.
func (s *Scrubber) Line(line []byte) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// MayHold is a quick test: could a secret be in a JSON line at all? It
// looks for each value as written and as encoding/json escapes it
// (acpflow's own lines: & as \u0026); a value with characters that other
// encoders may escape otherwise (quotes, backslashes, control characters,
// non-ASCII) is assumed to be there.
func (s *Scrubber) MayHold(line []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mayHold(line)
}

func (s *Scrubber) mayHold(line []byte) bool {
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

// inLine reports whether v may be in a JSON line (see MayHold).
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

func (s *Scrubber) walk(v any) any {
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

func (s *Scrubber) scrubString(str string) string {
	for _, m := range s.masks {
		str = strings.ReplaceAll(str, m.from, m.to)
	}
	for _, v := range s.secrets {
		str = strings.ReplaceAll(str, v, Redacted)
	}
	return str
}

// Cut is how much of text, the latest of a stream scrubbed piece by piece
// (a command's stdout as it is read), can be scrubbed and passed on now:
// the rest may be the beginning of a secret whose end is still to come,
// or a secret that would be split, and waits for more (or the stream's
// end). Without secrets it is all of text.
func (s *Scrubber) Cut(text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	needles := slices.Clone(s.secrets)
	for _, m := range s.masks {
		needles = append(needles, m.from)
	}
	longest := 0
	for _, v := range needles {
		longest = max(longest, len(v))
	}
	if longest == 0 {
		return len(text)
	}
	cut := len(text) - (longest - 1)
	// A secret that begins before the cut and ends past it moves the cut
	// to its beginning; one that begins further back is whole in text.
	for moved := true; moved && cut > 0; {
		moved = false
		for _, v := range needles {
			from, to := max(0, cut-len(v)+1), min(len(text), cut+len(v)-1)
			if from < to {
				if i := strings.Index(text[from:to], v); i >= 0 && from+i < cut {
					cut, moved = from+i, true
				}
			}
		}
	}
	cut = max(cut, 0)
	for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return cut
}
