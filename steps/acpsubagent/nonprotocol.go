package acpsubagent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/internal/termtext"
)

// An agent's stdout carries JSON-RPC messages only; its logs belong on
// stderr. A line that is not JSON during a turn means the stream can no
// longer be trusted (the agent printed where it should not, or its output
// is corrupt), and the SDK would skip it and wait on for an answer that may
// never come: the turn fails at once, quoting the line
// (docs/acp-subagent.md#the-turn). Outside a turn (a banner before
// initialize, a line between turns of a pooled agent) it is noise, counted
// in the teardown event.

// Bounds of what the error keeps of such a line: the first maxQuotedLine
// bytes are quoted, once scrubbed of secrets with the first maxKeptLine
// bytes, so that a secret that begins in the quoted part is whole when it
// is scrubbed.
const (
	maxQuotedLine = 200
	maxKeptLine   = 64 << 10
)

// notJSON sorts a line go-json could not read: blank (which the SDK skips),
// a JSON object (which encoding/json, as the SDK reads, may still take), or
// no message at all.
func notJSON(line []byte) lineKind {
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] == '{' && json.Valid(t) {
		return lineOther
	}
	return lineNotJSON
}

// nonProtocolLine is the gate's error for a line that is not JSON during
// a turn: the beginning of the line, and its length.
type nonProtocolLine struct {
	head []byte // the first maxKeptLine bytes, unscrubbed
	size int    // the line's length without its newline
}

func newNonProtocolLine(line []byte) *nonProtocolLine {
	line = bytes.TrimRight(line, "\r\n")
	return &nonProtocolLine{head: bytes.Clone(line[:min(len(line), maxKeptLine)]), size: len(line)}
}

// Error says what happened without the line, which only quoted may show
// (it needs the attempt's secrets).
func (e *nonProtocolLine) Error() string {
	return fmt.Sprintf("wrote a line that is not JSON (%d bytes) on stdout during its turn; an ACP agent writes only JSON-RPC messages there (logs belong on stderr)", e.size)
}

// quoted is the error with the line's beginning quoted: scrubbed by scrub,
// cut to maxQuotedLine bytes, escaped for a terminal.
func (e *nonProtocolLine) quoted(scrub func(string) string) string {
	s := scrub(string(e.head))
	shown := termtext.Cut(s, maxQuotedLine)
	q := termtext.Quote(shown, 0)
	if len(shown) < len(s) || e.size > len(e.head) {
		q += fmt.Sprintf("… (cut from %d bytes)", e.size)
	}
	return "wrote a line that is not JSON on stdout during its turn: " + q +
		"; an ACP agent writes only JSON-RPC messages there (logs belong on stderr)"
}
