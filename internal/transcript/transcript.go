// Package transcript is the record of what acpflow and an agent said to
// each other during one step attempt: every ACP message, both directions,
// with its time offset (docs/transcripts.md). The run store keeps one per
// attempt; `acpflow export` writes them as a File, which `builtin: replay`
// plays back and `acpflow policy test` re-decides.
package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/acpflow/acpflow/policies"
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
// and the env decision of the attempt's spawn.
type Step struct {
	Step        string                      `json:"step"`
	Index       *int                        `json:"index,omitempty"`
	Attempt     int                         `json:"attempt"`
	Agent       string                      `json:"agent,omitempty"`
	Truncated   bool                        `json:"truncated,omitempty"`
	Messages    []Message                   `json:"messages"`
	Permissions []policies.PermissionRecord `json:"permissions,omitempty"`
	// Spawn is nil when the attempt asked no env policy (it continued a
	// session on a live process) or was recorded before spawns were.
	Spawn *Spawn `json:"spawn,omitempty"`
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
	Policy policies.Source `json:"policy"` // which env policy decided: workflow, step or default
	Rule   string          `json:"rule,omitempty"`
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

// Write writes f as indented JSON.
func (f *File) Write(w io.Writer) error {
	f.Format = Format
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(f)
}

// maxFileBytes bounds a transcript file read: a run's transcripts, each
// at most MaxBytes.
const maxFileBytes = 1 << 30

// ReadFile reads a transcript file, checking its format.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var f File
	dec := json.NewDecoder(io.LimitReader(fh, maxFileBytes))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: not a transcript file: %w", path, err)
	}
	if f.Format != Format {
		return nil, fmt.Errorf("%s: not a transcript file of this acpflow (format %q, want %q)", path, f.Format, Format)
	}
	// A file exported before outer policies names no layer: every record
	// in it was the workflow's.
	for i := range f.Steps {
		for j := range f.Steps[i].Permissions {
			if p := &f.Steps[i].Permissions[j]; p.Layer == "" {
				p.Layer = policies.LayerWorkflow
			}
		}
	}
	return &f, nil
}

// Last returns the last attempt recorded for step (of element index, when
// not nil): what a replay of the step plays.
func (f *File) Last(step string, index *int) (*Step, error) {
	var found *Step
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Step != step || (index == nil) != (s.Index == nil) || (index != nil && *index != *s.Index) {
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
