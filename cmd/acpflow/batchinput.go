package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
	"github.com/acpflow/acpflow/workflows"
)

// maxBatchLine bounds one JSONL line (an input object can hold a
// document). A longer line fails its own run; the batch goes on.
const maxBatchLine = 16 << 20

// fifoWriterWait is how long `--inputs FIFO` waits for a process to open
// the named pipe for writing: open(2) of a FIFO blocks until then.
const fifoWriterWait = 10 * time.Second

// batchInput is an opened `--inputs`: a regular file (read whole before
// the first run, so that every line is stored for resume), or a stream
// (stdin, a pipe), whose lines run as they come.
type batchInput struct {
	io.ReadCloser
	regular bool
}

// openInputs opens `--inputs path` ("-" is stdin). Only what ends is
// accepted: a regular file or a pipe; a directory or a device (/dev/zero
// never ends) is an error, and a named pipe that no process opens for
// writing within wait is one too.
func openInputs(path string, wait time.Duration) (*batchInput, error) {
	if path == "-" {
		fi, err := os.Stdin.Stat()
		return &batchInput{ReadCloser: io.NopCloser(os.Stdin), regular: err == nil && fi.Mode().IsRegular()}, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--inputs: %w", err)
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--inputs: %w", err)
		}
		return &batchInput{ReadCloser: f, regular: true}, nil
	case m.IsDir():
		return nil, fmt.Errorf("--inputs %s is a directory, not a JSONL file", path)
	case m&os.ModeNamedPipe != 0:
		f, err := openFIFO(path, wait)
		if err != nil {
			return nil, err
		}
		return &batchInput{ReadCloser: f}, nil
	default:
		return nil, fmt.Errorf("--inputs %s is %s, not a JSONL file or a pipe", path, fileKind(m))
	}
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// openFIFO opens a named pipe for reading, waiting at most wait for a
// writer. When none comes, it opens the pipe for writing itself, which
// releases the blocked open, and gives up.
func openFIFO(path string, wait time.Duration) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("--inputs: %w", o.err)
		}
		return o.f, nil
	case <-timer.C:
	}
	if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
	if o := <-ch; o.f != nil {
		o.f.Close()
	}
	return nil, fmt.Errorf("--inputs %s is a named pipe that no process opened for writing within %s", path, wait)
}

// lineReader reads a batch's input lines one at a time, in memory bounded
// by maxBatchLine whatever the input holds.
type lineReader struct {
	path string
	br   *bufio.Reader
	n    int   // the last line's number
	size int64 // and its length in bytes
	buf  []byte
}

func newLineReader(r io.Reader, path string) *lineReader {
	return &lineReader{path: path, br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line that is not blank, decoded (see decodeLine);
// io.EOF after the last.
func (r *lineReader) next() (store.BatchLine, error) {
	for {
		text, size, err := r.readLine()
		if err != nil {
			return store.BatchLine{}, err
		}
		if size > maxBatchLine {
			return store.BatchLine{Line: r.n, Error: fmt.Sprintf("the line is longer than %d MiB (%d bytes)", maxBatchLine>>20, size)}, nil
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		return decodeLine(r.n, text), nil
	}
}

// readLine reads one line without its end; past maxBatchLine bytes it
// keeps reading to the line's end but no longer keeps what it reads.
func (r *lineReader) readLine() (text []byte, size int64, err error) {
	if cap(r.buf) > 1<<20 {
		r.buf = nil // a long line's buffer is not kept for the short ones
	}
	r.buf = r.buf[:0]
	var chunk []byte
	for {
		chunk, err = r.br.ReadSlice('\n')
		size += int64(len(chunk))
		if size <= maxBatchLine+1 {
			if need := len(r.buf) + len(chunk); need > cap(r.buf) {
				// Doubling: append's gentler growth copies a long line ~5 times over.
				r.buf = append(make([]byte, 0, min(max(2*cap(r.buf), need), maxBatchLine+1)), r.buf...)
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
	defer func() { r.size = min(size, maxBatchLine) }()
	if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
		size-- // the newline is not the line's
	}
	if size > maxBatchLine {
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
