package replayagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/internal/transcript"
)

// Name is the builtin's name: `builtin: replay`, `acpflow agent replay`.
const Name = "replay"

// Source is the file and step `acpflow agent replay` plays for an agent's from: in a step
// stepID: from names an existing transcript file (FILE: the step of the same id in it), or an
// existing file followed by /STEP (that step). The file is made absolute, since the agent runs
// in another directory.
//
// # Notes
//
// A run id (RUN, RUN/STEP) is not a file: acpflow run resolves it into one before the agent is
// spawned, and Source refuses what is left unresolved. A file is what the path names from the
// current directory; the workflow loader already made a path relative to the workflow file's
// directory absolute.
func Source(from, stepID string) (file, step string, err error) {
	if isFile(from) {
		file, step = from, stepID
	} else if i := strings.LastIndexByte(from, '/'); i > 0 && i < len(from)-1 && isFile(from[:i]) {
		file, step = from[:i], from[i+1:]
	} else {
		return "", "", fmt.Errorf("from: %s: no such transcript file (a run id is resolved by acpflow run)", from)
	}
	if file, err = filepath.Abs(file); err != nil {
		return "", "", fmt.Errorf("from: %s: %w", from, err)
	}
	return file, step, nil
}

// Anchor is an agent's from: as the workflow loader keeps it, dir being the workflow file's
// directory: a transcript file relative to dir (FILE, or FILE/STEP), as a wasm: path is, made
// absolute when it is there; anything else (a run id, RUN/STEP, a path from the current
// directory) as written, for acpflow run to resolve.
func Anchor(dir, from string) string {
	if from == "" || filepath.IsAbs(from) {
		return from
	}
	file, step := from, ""
	if !isFile(filepath.Join(dir, file)) {
		i := strings.LastIndexByte(from, '/')
		if i <= 0 || !isFile(filepath.Join(dir, from[:i])) {
			return from
		}
		file, step = from[:i], from[i:]
	}
	abs, err := filepath.Abs(filepath.Join(dir, file))
	if err != nil {
		return from
	}
	return abs + step
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Load reads what `acpflow agent replay FILE STEP` plays: the last attempt recorded for STEP
// in the transcript file (STEP#INDEX: for that element of a for-each step).
func Load(file, step string) (*transcript.Step, error) {
	id, index, err := ParseStep(step)
	if err != nil {
		return nil, err
	}
	f, err := transcript.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s, err := f.Last(id, index)
	if err != nil && index != nil {
		return nil, fmt.Errorf("%s: %w (element %d)", file, err, *index)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// ParseStep reads STEP or STEP#INDEX (a for-each element, INDEX from 0).
func ParseStep(s string) (step string, index *int, err error) {
	step, ix, hasIndex := strings.Cut(s, "#")
	if step == "" {
		return "", nil, fmt.Errorf("step %q: want STEP or STEP#INDEX", s)
	}
	if !hasIndex {
		return step, nil, nil
	}
	n, err := strconv.Atoi(ix)
	if err != nil || n < 0 {
		return "", nil, fmt.Errorf("step %q: the index after # must be a whole number from 0", s)
	}
	return step, &n, nil
}
