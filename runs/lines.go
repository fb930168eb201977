package runs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/workflows"
)

// MaxLine bounds one JSONL line of a batch's inputs (an input object can
// hold a document). A longer line fails its own run; the batch goes on.
const MaxLine = 16 << 20

// LineReader reads a batch's input lines (JSONL: an object of inputs per
// line) one at a time, in memory bounded by MaxLine whatever the input
// holds.
type LineReader struct {
	path string
	br   *bufio.Reader
	n    int   // the last line's number
	size int64 // and its length in bytes
	buf  []byte
}

// NewLineReader reads lines from r; path names the input in errors.
func NewLineReader(r io.Reader, path string) *LineReader {
	return &LineReader{path: path, br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next line that is not blank, decoded: a line that is
// not an object of inputs (too long, not UTF-8, not JSON, not an object)
// has its Error set, and is no error of Next's. io.EOF after the last.
func (r *LineReader) Next() (store.BatchLine, error) {
	for {
		text, size, err := r.readLine()
		if err != nil {
			return store.BatchLine{}, err
		}
		if size > MaxLine {
			return store.BatchLine{Line: r.n, Error: fmt.Sprintf("the line is longer than %d MiB (%d bytes)", MaxLine>>20, size)}, nil
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		return decodeLine(r.n, text), nil
	}
}

// readLine reads one line without its end; past MaxLine bytes it
// keeps reading to the line's end but no longer keeps what it reads.
func (r *LineReader) readLine() (text []byte, size int64, err error) {
	if cap(r.buf) > 1<<20 {
		r.buf = nil // a long line's buffer is not kept for the short ones
	}
	r.buf = r.buf[:0]
	var chunk []byte
	for {
		chunk, err = r.br.ReadSlice('\n')
		size += int64(len(chunk))
		if size <= MaxLine+1 {
			if need := len(r.buf) + len(chunk); need > cap(r.buf) {
				// Doubling: append's gentler growth copies a long line ~5 times over.
				r.buf = append(make([]byte, 0, min(max(2*cap(r.buf), need), MaxLine+1)), r.buf...)
			}
			r.buf = append(r.buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && size == 0 {
			return nil, 0, io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("--inputs %s: line %d: %w", r.path, r.n+1, err)
		}
		break
	}
	r.n++
	defer func() { r.size = min(size, MaxLine) }()
	if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
		size-- // the newline is not the line's
	}
	if size > MaxLine {
		return nil, size, nil
	}
	return r.buf[:size], size, nil
}

// decodeLine decodes one input line: a JSON object, in UTF-8. What it is
// not is the line's Error.
func decodeLine(n int, text []byte) store.BatchLine {
	l := store.BatchLine{Line: n}
	if !utf8.Valid(text) {
		l.Error = "the line is not valid UTF-8"
		return l
	}
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		l.Error = "not a JSON object of inputs: " + jsonProblem(err)
		return l
	}
	obj, ok := v.(map[string]any)
	if !ok {
		l.Error = "not a JSON object of inputs, but " + jsonKind(v)
		return l
	}
	l.Inputs = obj
	return l
}

// jsonProblem says what is wrong with a line that is not JSON, without
// quoting the line (it may be long, or hold a secret).
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// resolveLine checks a stored line against the workflow's inputs: its
// error, if any, names the inputs file and the line.
func resolveLine(wf *engine.Workflow, path string, l store.BatchLine) batchLine {
	bl := batchLine{line: l.Line, raw: l.Inputs}
	if l.Error != "" {
		bl.err = fmt.Errorf("%s:%d: %s", path, l.Line, l.Error)
		return bl
	}
	inputs, err := workflows.ResolveInputs(wf, l.Inputs)
	if err != nil {
		bl.err = fmt.Errorf("%s:%d: %w", path, l.Line, err)
		return bl
	}
	bl.inputs = inputs
	return bl
}
