package replayagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/internal/regularfile"
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
// directory absolute. A path to something that is not a regular file (a directory, a named
// pipe, /dev/zero) is refused saying what it is (IsPath).
func Source(from, stepID string) (file, step string, err error) {
	if isFile(from) {
		file, step = from, stepID
	} else if i := strings.LastIndexByte(from, '/'); i > 0 && i < len(from)-1 && isFile(from[:i]) {
		file, step = from[:i], from[i+1:]
	} else if what := notRegular(from); what != "" {
		return "", "", fmt.Errorf("from: %s: not a transcript file: %s", from, what)
	} else {
		return "", "", fmt.Errorf("from: %s: no such transcript file (a run id is resolved by acpflow run)", from)
	}
	if file, err = filepath.Abs(file); err != nil {
		return "", "", fmt.Errorf("from: %s: %w", from, err)
	}
	return file, step, nil
}

// IsPath reports whether from can only be meant as a file, never as a run id: it is absolute,
// starts with ./ or ../, or names something that exists but is no regular file (then Source
// says what it is). acpflow run does not look such a from: up in the run store.
func IsPath(from string) bool {
	return filepath.IsAbs(from) || strings.HasPrefix(from, "./") || strings.HasPrefix(from, "../") || notRegular(from) != ""
}

// notRegular says what from is when it exists and is not a regular file ("a directory", "a
// character device", …), or for FILE/STEP what its FILE is ("/dev/zero is a character
// device"); "" otherwise. A directory before /STEP is not named: there, from is a missing
// file in it.
func notRegular(from string) string {
	if st, err := os.Stat(from); err == nil && !st.Mode().IsRegular() {
		return regularfile.Kind(st.Mode())
	}
	if i := strings.LastIndexByte(from, '/'); i > 0 {
		if st, err := os.Stat(from[:i]); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
			return from[:i] + " is " + regularfile.Kind(st.Mode())
		}
	}
	return ""
}

// Anchor is an agent's from: as the workflow loader keeps it, dir being the workflow file's
// directory: a transcript file relative to dir (FILE, or FILE/STEP), as a wasm: path is, made
// absolute when it is there (or when something else is there, which Source then names);
// anything else (a run id, RUN/STEP, a path from the current directory) as written, for
// acpflow run to resolve.
func Anchor(dir, from string) string {
	if from == "" || filepath.IsAbs(from) {
		return from
	}
	file, step := from, ""
	if !isFile(filepath.Join(dir, file)) && notRegular(filepath.Join(dir, file)) == "" {
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
//
// # Notes
//
// The file is read a step attempt at a time (transcript.Reader.Summaries), keeping only where
// the attempt found so far is, then that attempt is read, so that memory is bounded by the
// largest attempt, whatever the file's size.
// Only a regular file is read: a named pipe or a device is refused, saying what it is.
func Load(file, step string) (*transcript.Step, error) {
	id, index, err := ParseStep(step)
	if err != nil {
		return nil, err
	}
	r, err := transcript.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	found := int64(-1)
	attempt := 0
	if _, err := r.Summaries(func(s *transcript.Summary, at int64) error {
		if s.Of(id, index) && (found < 0 || s.Attempt > attempt) {
			found, attempt = at, s.Attempt
		}
		return nil
	}); err != nil {
		return nil, err
	}
	switch {
	case found < 0 && index != nil:
		return nil, fmt.Errorf("%s: the transcript has no step %s (element %d)", file, id, *index)
	case found < 0:
		return nil, fmt.Errorf("%s: the transcript has no step %s", file, id)
	}
	return r.At(found)
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
