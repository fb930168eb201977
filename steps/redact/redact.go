// Package redact is what every step kind scrubs its records with: the
// secrets one attempt knows, and how each string the attempt hands on (its
// output, error, stderr tail, events, transcript lines) loses them
// (docs/transcripts.md#what-is-kept). An agent step and a shell step keep
// the same secrets the same way, so that a token is "[redacted]" whichever
// kind of step printed it.
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
//     secret from anywhere, and an MCP server's url may carry one; in a
//     shell step's run:, one that reads env;
//   - the env policy saw it when it refused the spawn, in the refusal's
//     reason and error, the one thing recorded then.
//
// It is never one when it has fewer than MinSecret characters, touches a
// path acpflow records (Scrubber.touchesPath), or is a path of this machine
// (localPaths: GOOGLE_APPLICATION_CREDENTIALS names a secret, it is none).
// Ambient values of other names (OLDPWD, HOME, LANG) and literal values of
// other names (LOG_LEVEL: debug) are not secrets, whether the policy
// passed them or not.
package redact

import (
	"errors"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

// MinSecret is the shortest value a record is scrubbed of: shorter ones
// ("1", "true", "dev") are words of every message, and scrubbing them
// would garble what it keeps without hiding anything.
const MinSecret = 6

// Redacted stands for a secret in a record.
const Redacted = "[redacted]"

// Piece is a part of a rendered string: a literal of the file, or what a
// ${{ }} produced.
type Piece struct {
	Text      string
	Templated bool
}

// RenderPieces renders raw as the step's Render does, one ${{ }} at a
// time, so that what each produced is known: the pieces joined are the
// rendered string. A string without templates is one literal piece.
func RenderPieces(raw string, render func(string) (string, error)) ([]Piece, error) {
	if !strings.Contains(raw, "${{") {
		return []Piece{{Text: raw}}, nil
	}
	var out []Piece
	rest := raw
	for rest != "" {
		i := strings.Index(rest, "${{")
		if i < 0 {
			out = append(out, Piece{Text: rest})
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
			out = append(out, Piece{Text: rest[:i]})
		}
		v, err := render(rest[i : i+j+2])
		if err != nil {
			return nil, err
		}
		out = append(out, Piece{Text: v, Templated: true})
		rest = rest[i+j+2:]
	}
	return out, nil
}

// Joined is the string the pieces make.
func Joined(pieces []Piece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Produced is what the templates among pieces produced.
func Produced(pieces []Piece) []string {
	var out []string
	for _, p := range pieces {
		if p.Templated {
			out = append(out, p.Text)
		}
	}
	return out
}

// CredentialValues are the values of env whose names are a credential's.
func CredentialValues(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if policies.IsCredential(k) {
			out = append(out, v)
		}
	}
	return out
}
