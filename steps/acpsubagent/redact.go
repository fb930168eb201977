package acpsubagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// What a step must never record (docs/transcripts.md#what-is-kept): the
// attempt's scribe knows the secrets, and scrubs with them the transcript
// and everything else the step hands on (its events, output, error, stderr
// tail and permission records).
//
// A value is a secret when:
//
//   - its variable's name is a credential's (policies.IsCredential): an
//     ambient variable, whether the env policy passed it or not; an
//     explicit one (the agent's env:, the step's with.env); an MCP
//     server's env;
//   - it is an MCP server's env or header value, whatever its name;
//   - a ${{ }} produced it, in an explicit env value or anywhere in an MCP
//     server (command, args, env, url, headers): an expression may read a
//     secret from anywhere, and an MCP server's url may carry one;
//   - the env policy saw it when it refused the spawn, in the refusal's
//     reason and error, the one thing recorded then (attempt.sawAll).
//
// It is never one when it has fewer than minSecret characters, touches a
// path acpflow records (scribe.touchesPath), or is a path of this machine
// (localPaths: GOOGLE_APPLICATION_CREDENTIALS names a secret, it is none).
// Ambient values of other names (OLDPWD, HOME, LANG) and literal values of
// other names (LOG_LEVEL: debug) are not secrets, whether the policy
// passed them or not.

// piece is a part of a rendered string: a literal of the file, or what a
// ${{ }} produced.
type piece struct {
	text      string
	templated bool
}

// renderPieces renders raw as the step's Render does, one ${{ }} at a
// time, so that what each produced is known: the pieces joined are the
// rendered string. A string without templates is one literal piece.
func renderPieces(raw string, render func(string) (string, error)) ([]piece, error) {
	if !strings.Contains(raw, "${{") {
		return []piece{{text: raw}}, nil
	}
	var out []piece
	rest := raw
	for rest != "" {
		i := strings.Index(rest, "${{")
		if i < 0 {
			out = append(out, piece{text: rest})
			break
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			// Unclosed: the whole string, for render's own error.
			if _, err := render(raw); err != nil {
				return nil, err
			}
			return nil, errors.New("unclosed ${{: add the closing }}")
		}
		if i > 0 {
			out = append(out, piece{text: rest[:i]})
		}
		v, err := render(rest[i : i+j+2])
		if err != nil {
			return nil, err
		}
		out = append(out, piece{text: v, templated: true})
		rest = rest[i+j+2:]
	}
	return out, nil
}

// joined is the string the pieces make.
func joined(pieces []piece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.text)
	}
	return b.String()
}

// produced is what the templates among pieces produced.
func produced(pieces []piece) []string {
	var out []string
	for _, p := range pieces {
		if p.templated {
			out = append(out, p.text)
		}
	}
	return out
}

// credentialValues are the values of env whose names are a credential's.
func credentialValues(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if policies.IsCredential(k) {
			out = append(out, v)
		}
	}
	return out
}

// text scrubs one string the attempt records.
func (s *scribe) text(str string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrubString(str)
}

// value scrubs every string inside v, a value decoded from JSON (changed
// in place).
func (s *scribe) value(v any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walk(v)
}

// empty reports whether the scribe knows nothing to scrub.
func (s *scribe) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.secrets) == 0 && len(s.masks) == 0
}

// redactedError is an error whose words were scrubbed; it unwraps to the
// original, so that errors.Is and As still see the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// err is err with its words scrubbed.
func (s *scribe) err(err error) error {
	if msg := s.text(err.Error()); msg != err.Error() {
		return &redactedError{msg, err}
	}
	return err
}

// sawAll scrubs every value a refused spawn's env policy was given,
// whatever its name: the policy's reason to refuse may quote any of them.
// The rules of what is never a secret hold.
func (a *attempt) sawAll(req *policies.EnvRequest) *scribe {
	values := slices.Collect(maps.Values(req.Ambient))
	values = append(values, slices.Collect(maps.Values(req.Explicit))...)
	return newScribe("", values, a.inv.Workspace, a.cwd)
}

// result scrubs what an attempt hands to the engine: its output and final
// message, its value, its error, its stderr tail and its permission
// records. The transcript was scrubbed line by line.
func (s *scribe) result(res *steps.Result) {
	if s.empty() {
		return
	}
	res.Output, res.Final, res.Stderr = s.text(res.Output), s.text(res.Final), s.text(res.Stderr)
	if res.JSON != nil {
		res.JSON = s.value(res.JSON)
	}
	if res.Err != nil {
		res.Err = s.err(res.Err)
	}
	for i := range res.Permissions {
		res.Permissions[i] = s.permission(res.Permissions[i])
	}
}

// permission scrubs what a permission record holds of the agent's words.
func (s *scribe) permission(r policies.PermissionRecord) policies.PermissionRecord {
	r.Title, r.Command, r.Reason = s.recordText(r.Title), s.recordText(r.Command), s.text(r.Reason)
	if r.Locations != nil {
		locs := make([]policies.ToolLocation, len(r.Locations))
		for i, l := range r.Locations {
			l.Path = s.recordText(l.Path)
			locs[i] = l
		}
		r.Locations = locs
	}
	return r
}

// recordText scrubs a record's text, which recordText (bounds.go) may
// have cut before any scribe saw it: a secret the cut went through is
// there only as its beginning, which scrubString cannot recognise, so an
// end of the kept part that begins a secret is scrubbed too.
func (s *scribe) recordText(str string) string {
	str = s.text(str)
	head, tail, cut := strings.Cut(str, cutMark)
	if !cut {
		return str
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		for k := len(v) - 1; k > 0; k-- {
			if strings.HasSuffix(head, v[:k]) {
				head = head[:len(head)-k] + redacted
				break
			}
		}
	}
	return head + cutMark + tail
}

// redactingSink scrubs the events of an attempt that carry the agent's
// words before they reach the run's sink (the terminal, --json, the run
// store).
type redactingSink struct {
	next   steps.Sink
	scribe *scribe
}

func (r redactingSink) Emit(ev steps.Event) {
	if !r.scribe.empty() {
		ev.Data = r.scribe.event(ev.Data)
	}
	r.next.Emit(ev)
}

// event is d with the agent's words scrubbed.
func (s *scribe) event(d steps.EventData) steps.EventData {
	switch x := d.(type) {
	case acpagent.MessageChunk:
		x.Text = s.text(x.Text)
		return x
	case acpagent.AgentUpdate:
		b, err := json.Marshal(x.Update)
		if err != nil {
			return x
		}
		s.mu.Lock()
		may := s.mayHold(b)
		s.mu.Unlock()
		if !may {
			return x
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return x
		}
		x.Update = s.value(v)
		return x
	case steps.Permission:
		x.PermissionRecord = s.permission(x.PermissionRecord)
		return x
	case steps.Unasked:
		x.PermissionRecord = s.permission(x.PermissionRecord)
		return x
	case acpagent.Asking:
		x.Title = s.text(x.Title)
		return x
	case steps.Warning:
		x.Message = s.text(x.Message)
		return x
	case acpagent.SchemaRetry:
		errs := make([]string, len(x.Errors))
		for i, e := range x.Errors {
			errs[i] = s.text(e)
		}
		x.Errors = errs
		return x
	}
	return d
}
