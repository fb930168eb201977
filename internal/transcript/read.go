package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/acpflow/acpflow/decisions"
	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/regularfile"
)

// Bounds of a transcript file as read. A file is read one step attempt at a
// time, so what a reader holds is bounded by these, whatever the size of
// the file.
const (
	// MaxStepBytes bounds one step attempt in a file (its JSON: messages,
	// permission records, spawn) and any other value of it. acpflow keeps
	// at most MaxBytes of messages per attempt; the rest is room for the
	// step's permission records (a for-each step's are all on its first
	// attempt) and indentation.
	MaxStepBytes = 64 << 20
	// MaxSteps bounds the step attempts of one file.
	MaxSteps = 1_000_000
)

// Header is a transcript file but its steps.
type Header struct {
	Format   string
	RunID    string
	Workflow string
}

// Reader reads a transcript file a step attempt at a time (Each), as often
// as asked, and one attempt again by its position (At). Each read has a
// cursor of its own, so one may run within another.
type Reader struct {
	path string
	f    *os.File
}

// Open opens the transcript file at path. Only a regular file is read: a
// named pipe, a device or a directory is refused before anything is read
// (a pipe with no writer would block the read forever, /dev/zero never
// ends), with an error that says what it is.
func Open(path string) (*Reader, error) {
	// O_NONBLOCK: opening a named pipe must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a transcript file: not a regular file (%s)", path, regularfile.Kind(st.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Reader{path: path, f: f}, nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Each reads the file from its start, calls each with every step attempt
// in order, with its position for At, and returns the file's header. An
// error from each stops the read and is returned as it is; any other
// error says where the file is not a transcript file of this acpflow.
//
// # Notes
//
// The format is checked as soon as it is read: acpflow writes it first,
// so each is never called for a file of another format. A file written by
// hand with "format" after "steps" is checked at the end, after each has
// seen its steps. The Step handed to each is its own.
func (r *Reader) Each(each func(s *Step, at int64) error) (Header, error) {
	h, err := decode(r.fromStart(), newStep, stepsTo(each))
	return h, r.fileError(err)
}

// fromStart reads the file from its start, with a cursor of its own: Each,
// Summaries and At may run within one another.
func (r *Reader) fromStart() io.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(r.f, 0, 1<<62), 64<<10)
}

// At reads the step attempt at position at, as Each gave it.
func (r *Reader) At(at int64) (*Step, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r.f, at, 1<<62), 64<<10)
	// A position is where the decoder stopped: before the comma and the
	// blanks that lead to the attempt.
	for {
		c, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%s: no step attempt at byte %d: %w", r.path, at, err)
		}
		if c != ',' && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			br.UnreadByte()
			break
		}
	}
	lr := &budgetReader{r: br, left: MaxStepBytes}
	var f stepJSON
	if err := json.NewDecoder(lr).Decode(&f); err != nil {
		if errors.Is(err, errOverBudget) {
			return nil, fmt.Errorf("%s: the step attempt at byte %d is over %s", r.path, at, bytesize.Format(MaxStepBytes))
		}
		return nil, fmt.Errorf("%s: the step attempt at byte %d: %w", r.path, at, err)
	}
	s := f.step()
	defaultLayer(&s)
	return &s, nil
}

// callerError carries the error of Decode's each through it unchanged.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// errOverBudget is a value of a file past MaxStepBytes.
var errOverBudget = errors.New("over budget")

// budgetReader reads at most left bytes more; the decoder resets left
// before each value, so that no one value (and the decoder's buffer) grows
// past it.
type budgetReader struct {
	r    io.Reader
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errOverBudget
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// Summary is what Reader.Summaries reads of a step attempt: which one it
// is, not its messages.
type Summary struct {
	Step    string
	Index   *int
	Attempt int
	// Permissions is whether the attempt holds permission records.
	Permissions bool
}

// Of reports whether s is an attempt of step (of element index, when not
// nil; of no element when nil).
func (s *Summary) Of(step string, index *int) bool {
	return s.Step == step && (index == nil) == (s.Index == nil) && (index == nil || *index == *s.Index)
}

// summary is the JSON of a step attempt as Summaries decodes it: its
// messages are skipped (scanned, never kept).
type summary struct {
	Step        string          `json:"step"`
	Index       *int            `json:"index"`
	Attempt     int             `json:"attempt"`
	Permissions json.RawMessage `json:"permissions"`
}

// Summaries reads the file from its start as Each does, handing each
// attempt's Summary instead of the attempt: cheaper, for a first look
// (where a step's attempts are), then At for the ones wanted.
func (r *Reader) Summaries(each func(s *Summary, at int64) error) (Header, error) {
	h, err := decode(r.fromStart(), func() any { return new(summary) }, func(v any, at int64) error {
		sum := v.(*summary)
		p := bytes.TrimSpace(sum.Permissions)
		return each(&Summary{Step: sum.Step, Index: sum.Index, Attempt: sum.Attempt,
			Permissions: len(p) > 0 && !bytes.Equal(p, []byte("null")) && !bytes.Equal(p, []byte("[]"))}, at)
	})
	return h, r.fileError(err)
}

// fileError is an error of Each or Summaries as they return it.
func (r *Reader) fileError(err error) error {
	var eachErr *callerError
	if errors.As(err, &eachErr) {
		return eachErr.err
	}
	if err != nil {
		return fmt.Errorf("%s: not a transcript file: %w", r.path, err)
	}
	return nil
}

// Decode reads one transcript file from in, a step attempt at a time, and
// calls each with every attempt and its byte offset in in; it returns the
// header. It is Reader.Each on any reader: every error but each's says
// what in the input is wrong, and where.
func Decode(in io.Reader, each func(s *Step, at int64) error) (Header, error) {
	h, err := decode(in, newStep, stepsTo(each))
	var eachErr *callerError
	if errors.As(err, &eachErr) {
		return h, eachErr.err
	}
	return h, err
}

// newStep is a step attempt as decode reads it: in the format's own types
// (format.go), made a Step by stepsTo.
func newStep() any { return new(stepJSON) }

// stepsTo hands decode's values to each as steps, their records' layers
// set (defaultLayer).
func stepsTo(each func(s *Step, at int64) error) func(v any, at int64) error {
	return func(v any, at int64) error {
		s := v.(*stepJSON).step()
		defaultLayer(&s)
		return each(&s, at)
	}
}

// decode is Decode, each step attempt decoded into a new value of
// newStep's.
func decode(in io.Reader, newStep func() any, each func(v any, at int64) error) (Header, error) {
	br := &budgetReader{r: in}
	d := &tokens{br: br, dec: json.NewDecoder(br)}
	var (
		h    Header
		seen = map[string]bool{}
		// stepsErr is each's error, kept while the format is not known:
		// the file is read on, so that one that is no transcript says so.
		stepsErr error
	)
	tok, err := d.next()
	if err != nil {
		return h, tokenError(err, d.dec, "want a JSON object")
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return h, fmt.Errorf("want a JSON object, got %s", describeToken(tok))
	}
	for d.more() {
		tok, err := d.next()
		if err != nil {
			return h, tokenError(err, d.dec, "want a key")
		}
		key, _ := tok.(string)
		if seen[key] {
			return h, fmt.Errorf("the key %q appears twice, at byte %d", key, d.dec.InputOffset())
		}
		seen[key] = true
		switch key {
		case "format":
			if err := d.value("format", &h.Format); err != nil {
				return h, err
			}
			if err := checkFormat(h.Format); err != nil {
				return h, err
			}
		case "run_id":
			if err := d.value("run_id", &h.RunID); err != nil {
				return h, err
			}
		case "workflow":
			if err := d.value("workflow", &h.Workflow); err != nil {
				return h, err
			}
		case "steps":
			if err := d.steps(&h, &stepsErr, newStep, each); err != nil {
				return h, err
			}
		default:
			// A key of a later format is skipped, within bounds.
			var skip json.RawMessage
			if err := d.value(key, &skip); err != nil {
				return h, err
			}
		}
	}
	if _, err := d.next(); err != nil {
		return h, tokenError(err, d.dec, "want the end of the object")
	}
	if err := checkFormat(h.Format); err != nil {
		return h, err
	}
	if stepsErr != nil {
		return h, &callerError{stepsErr}
	}
	return h, nil
}

// tokens reads a transcript's JSON, each token or value within
// MaxStepBytes of the file, so that no one value can take the memory.
type tokens struct {
	br    *budgetReader
	dec   *json.Decoder
	count int // the step attempts read
}

func (d *tokens) next() (json.Token, error) {
	d.br.left = MaxStepBytes
	return d.dec.Token()
}

func (d *tokens) more() bool {
	d.br.left = MaxStepBytes
	return d.dec.More()
}

// value decodes the next value into v; its errors say what it is.
func (d *tokens) value(what string, v any) error {
	d.br.left = MaxStepBytes
	err := d.dec.Decode(v)
	switch {
	case errors.Is(err, errOverBudget):
		return fmt.Errorf("%s is over %s", what, bytesize.Format(MaxStepBytes))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: the file ends inside it", what)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// steps reads the steps: list (or null), handing each step attempt to
// each. each's first error is kept in *stepsErr and the file read on
// while h's format is not known yet; once it is, the error ends the read.
func (d *tokens) steps(h *Header, stepsErr *error, newStep func() any, each func(v any, at int64) error) error {
	tok, err := d.next()
	if err != nil {
		return tokenError(err, d.dec, "steps: want a list")
	}
	if tok == nil {
		return nil // "steps": null, as a File without steps is written
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '[' {
		return fmt.Errorf("steps: want a list, got %s", describeToken(tok))
	}
	for d.more() {
		if d.count++; d.count > MaxSteps {
			return fmt.Errorf("more than %d step attempts: not the transcript of one run", MaxSteps)
		}
		at := d.dec.InputOffset()
		s := newStep()
		if err := d.value(fmt.Sprintf("the step attempt at byte %d", at), s); err != nil {
			return err
		}
		if *stepsErr == nil {
			if err := each(s, at); err != nil {
				*stepsErr = err
				if h.Format != "" {
					return &callerError{err}
				}
			}
		}
	}
	if _, err := d.next(); err != nil {
		return tokenError(err, d.dec, "steps: want the end of the list")
	}
	return nil
}

// checkFormat says whether a file of format f is one this acpflow reads.
func checkFormat(f string) error {
	if f != Format {
		return fmt.Errorf("not a transcript file of this acpflow (format %q, want %q)", f, Format)
	}
	return nil
}

// defaultLayer sets the layer of records exported before outer policies,
// which name none: every one of them was the workflow's.
func defaultLayer(s *Step) {
	for j := range s.Permissions {
		if p := &s.Permissions[j]; p.Layer == "" {
			p.Layer = decisions.LayerWorkflow
		}
	}
}

// tokenError words an error of the decoder between values.
func tokenError(err error, dec *json.Decoder, want string) error {
	switch {
	case errors.Is(err, errOverBudget):
		return fmt.Errorf("%s; found more than %s without one, at byte %d", want, bytesize.Format(MaxStepBytes), dec.InputOffset())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s; the file ends at byte %d", want, dec.InputOffset())
	}
	return fmt.Errorf("%s, at byte %d: %w", want, dec.InputOffset(), err)
}

// describeToken names a JSON token for an error.
func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
