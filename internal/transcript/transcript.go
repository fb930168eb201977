// Package transcript is the record of what acpflow and an agent said to
// each other during one step attempt: every ACP message, both directions,
// with its time offset (docs/transcripts.md). The run store keeps one per
// attempt; `acpflow export` writes them as a File, which `builtin: replay`
// plays back and `acpflow policy test` re-decides.
package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/acpflow/acpflow/decisions"
)

// Directions of a message.
const (
	ToAgent   = "to_agent"   // acpflow (the client) → agent
	FromAgent = "from_agent" // agent → acpflow
)

// Format names the file format and its version.
const Format = "acpflow-transcript/1"

// MaxBytes bounds one attempt's transcript (the messages' JSON): past it
// no message is kept and the transcript is marked truncated.
const MaxBytes = 4 << 20

// Message is one JSON-RPC message as it went over the wire (one line),
// after redaction (see Recorder).
type Message struct {
	Dir  string          `json:"dir"`
	AtMS int64           `json:"at_ms"` // since the attempt began
	Msg  json.RawMessage `json:"msg"`
}

// Step is the transcript of one attempt of one step (of one for-each
// element when Index is set), with the permission records acpflow made
// and the env decision of the attempt's spawn. However it is encoded, it
// is written in the format (stepJSON, format.go).
type Step struct {
	Step        string
	Index       *int
	Attempt     int
	Agent       string
	Truncated   bool
	Messages    []Message
	Permissions []decisions.Permission
	// Spawn is nil when the attempt asked no env policy (it continued a
	// session on a live process) or was recorded before spawns were.
	Spawn *Spawn
	// Model is nil unless the agent's gateway recorded its exchanges.
	Model *Model
}

// Spawn is what the env policy decided before an attempt's spawn, by name
// only, so that `acpflow policy test` can decide it again under another
// env policy. It never holds a value: a name says which variable a rule
// saw; a value may be the secret the policy kept from the agent.
//
// # Notes
//
// An attempt of a `reuse: true` agent that took a pooled process asked the
// policy all the same (what it gives is part of the pool key), so it
// records its own decision, which is the environment of the process it
// used. The lists are sorted.
type Spawn struct {
	Policy decisions.Source `json:"policy"` // which env policy decided: workflow, step or default
	Rule   string           `json:"rule,omitempty"`
	// Deny is why the spawn was refused: the policy's reason, or
	// "policy error: …" when it failed. Env is empty then.
	Deny string `json:"deny,omitempty"`
	Cwd  string `json:"cwd"` // the agent's working directory, which a rule may read
	// Ambient are the names of acpflow's environment, Explicit those the
	// workflow set (the agent's env: with the step's with.env over it),
	// as the policy was given them.
	Ambient  []string `json:"ambient"`
	Explicit []string `json:"explicit"`
	// Env are the names the policy gave the child. acpflow adds PWD
	// (unless the workflow set it) and its marker ACPFLOW_AGENT at spawn;
	// no policy decides those.
	Env []string `json:"env"`
}

// File is what `acpflow export` writes and `from:` and `policy test
// --transcripts` read.
type File struct {
	Format   string `json:"format"`
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	Steps    []Step `json:"steps"`
}

// Write writes f as indented JSON, each message compact on a line of its
// own.
//
// # Notes
//
// A message is written as it went over the wire, not indented: indenting
// grows with the square of its nesting, so an agent's 18 KB message nested
// 9000 deep became 162 MB, past what a reader takes (MaxStepBytes).
func (f *File) Write(w io.Writer) error {
	f.Format = Format
	bare := *f
	bare.Steps = nil
	b, err := encode(bare, "", "  ")
	if err != nil {
		return err
	}
	b = b[:len(b)-1]
	const key = "\n  \"steps\": null" // the file's own key, as in writeStep
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return fmt.Errorf("no steps key in %s", b)
	}
	bw := bufio.NewWriter(w)
	bw.Write(b[:i])
	bw.WriteString("\n  \"steps\": [")
	for j := range f.Steps {
		if j > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n    ")
		if err := writeStep(bw, &f.Steps[j]); err != nil {
			return err
		}
	}
	if len(f.Steps) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	bw.Write(b[i+len(key):])
	bw.WriteString("\n")
	return bw.Flush()
}

// writeStep writes one attempt as Write lays it out, at the indentation of
// an element of "steps": its fields indented, in Step's order, but its
// messages one compact line each.
func writeStep(w *bufio.Writer, s *Step) error {
	bare := s.file()
	bare.Messages = nil
	b, err := encode(bare, "    ", "  ")
	if err != nil {
		return err
	}
	b = b[:len(b)-1]
	// The step's own key, at its depth: a deeper value is indented
	// further, and a newline inside a string is written \n.
	const key = "\n      \"messages\": null"
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return fmt.Errorf("step %s attempt %d: no messages key in %s", s.Step, s.Attempt, b)
	}
	w.Write(b[:i])
	w.WriteString("\n      \"messages\": [")
	for j, m := range s.Messages {
		line, err := encode(m, "", "")
		if err != nil {
			return fmt.Errorf("step %s attempt %d, message %d: %w", s.Step, s.Attempt, j+1, err)
		}
		if j > 0 {
			w.WriteString(",")
		}
		w.WriteString("\n        ")
		w.Write(line[:len(line)-1])
	}
	if len(s.Messages) > 0 {
		w.WriteString("\n      ")
	}
	w.WriteString("]")
	w.Write(b[i+len(key):])
	return nil
}

// encode is v as JSON, indented as asked, HTML left alone (`&&`, not
// `\u0026\u0026`), with a final newline.
func encode(v any, prefix, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadFile reads a whole transcript file, checking its format (Open). It
// holds every step attempt at once: for a file of any size, read it a step
// at a time with Open and Reader.Each.
func ReadFile(path string) (*File, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var f File
	h, err := r.Each(func(s *Step, _ int64) error {
		f.Steps = append(f.Steps, *s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Format, f.RunID, f.Workflow = h.Format, h.RunID, h.Workflow
	return &f, nil
}

// Last returns the last attempt recorded for step (of element index, when
// not nil): what a replay of the step plays.
func (f *File) Last(step string, index *int) (*Step, error) {
	var found *Step
	for i := range f.Steps {
		s := &f.Steps[i]
		if !s.Of(step, index) {
			continue
		}
		if found == nil || s.Attempt > found.Attempt {
			found = s
		}
	}
	if found == nil {
		return nil, errors.New("the transcript has no step " + step)
	}
	return found, nil
}

// Of reports whether s is an attempt of step (of element index, when not
// nil; of no element when nil).
func (s *Step) Of(step string, index *int) bool {
	return (&Summary{Step: s.Step, Index: s.Index}).Of(step, index)
}
