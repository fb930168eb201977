package workflows

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// Load reads and checks the workflow file at path. See Parse. The
// workflow's File is absolute, so that a run records where to find it
// again from any directory (resume); errors name the file as path does.
// Its Modules stay as the file names them (a worker places them beside
// it); they load relative to the file's directory.
func Load(path string) (*engine.Workflow, error) {
	src, err := ReadFile(path, "workflow")
	if err != nil {
		return nil, err
	}
	wf, err := Parse(path, src)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		wf.File = abs
	}
	return wf, nil
}

// Parse checks the workflow src, read from the file name, and returns it
// with every template and expression compiled and every step prepared by
// its kind. The kinds named by `uses:` must be registered (steps.Register)
// before the call; the CLI imports them.
//
// A workflow with problems returns Errors: all of them, each at its line
// and column and rendered with the offending source line.
//
// # Notes
//
// Parse never panics on any input. Should a bug make it panic anyway, the
// panic becomes an error asking for a report, so that a user never sees a
// Go stack trace (docs/cli.md).
func Parse(name string, src []byte) (*engine.Workflow, error) {
	wf, _, err := parse(name, src)
	return wf, err
}

// parse is Parse, returning besides the decoder that checked the file
// (for its warnings, needs.go).
func parse(name string, src []byte) (wf *engine.Workflow, d *decoder, err error) {
	defer func() {
		if r := recover(); r != nil {
			wf, d, err = nil, nil, Errors{{File: name, Msg: fmt.Sprintf("internal error while checking the workflow (please report it): %v", r)}}
		}
	}()
	src = trimBOM(src)
	errs := newErrorList(name, src)
	root := parseYAML(src, errs)
	if root == nil {
		return nil, nil, errs.result()
	}
	d = newDecoder(errs)
	d.workflow(root)
	g := d.graph()
	d.checkRefs(g)
	d.prepare()
	d.checkTypes()
	d.checkSessions(g)
	d.checkModes()
	if err := errs.result(); err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(src)
	d.wf.File = name
	d.wf.Hash = hex.EncodeToString(sum[:])
	for _, s := range d.steps {
		d.wf.Steps = append(d.wf.Steps, s.step)
	}
	return d.wf, d, nil
}

// trimBOM drops a UTF-8 byte order mark, which editors on Windows write
// and YAML allows at the start of a stream; goccy would read it as part of
// the first key.
func trimBOM(src []byte) []byte {
	return bytes.TrimPrefix(src, []byte("\ufeff"))
}

// prepare hands each step to its kind, which checks what only it knows
// (that with.agent names an agent, say) and returns the runnable step.
func (d *decoder) prepare() {
	for _, s := range d.steps {
		if !s.prepared {
			continue
		}
		run, err := s.kind.Prepare(steps.StepConfig{ID: s.step.ID, With: s.rawWith, Agents: d.agents, Dir: d.baseDir()})
		if err != nil {
			d.at(d.prepareErrorAt(s, err), "%s: %s", s.label, err)
			continue
		}
		s.step.Run = run
	}
}

// prepareErrorAt places a kind's error: on the value its steps.FieldError
// path leads to from the step, as deep as the file goes; any other error on
// with: (or the step, without one).
func (d *decoder) prepareErrorAt(s *stepInfo, err error) pos {
	var fe *steps.FieldError
	if errors.As(err, &fe) {
		path := fe.Path
		if s.shorthand && len(path) > 0 && path[0] == "with" {
			path = path[1:] // run: and its keys are the step's own
		}
		n, depth := follow(s.node, path)
		if fe.Excerpt != "" && depth == len(path) {
			if at := d.find(n, fe.Excerpt, fe.Col-1); at != n.pos {
				return at
			}
			// Written with escapes: the part itself, where it first is.
			return d.find(n, fe.Excerpt[byteOffset(fe.Excerpt, fe.Col-1):], 0)
		}
		return n.pos
	}
	if s.withNode != nil {
		return s.withNode.pos
	}
	return s.node.pos
}
