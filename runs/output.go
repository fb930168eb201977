package runs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/acpflow/acpflow/engine"
)

// Output writes `--output`: one JSON object per run, one line each, in
// completion order, each line in a single write so that no reader (and no
// crash) ever sees a torn line. Every backend's runs are written by it.
type Output struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	w     io.Writer // where the lines go: f, or the stream of WriteTo
	first error
}

// WriteTo is the --output of `--output -`: the result lines go to w (the
// command's stdout), nothing is read back, nothing is closed.
func WriteTo(w io.Writer) *Output {
	return &Output{path: "-", w: w}
}

// OpenOutput opens the --output file at path for appending; "" writes
// nothing.
func OpenOutput(path string) (*Output, error) {
	if path == "" {
		return &Output{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	return &Output{path: path, f: f, w: f}, nil
}

// Written reads the run ids of the lines already in the --output file, so
// that resume writes the results a killed acpflow had recorded but not yet
// written, and none twice. A last line cut short (a full disk) is ended
// with a newline, so that the next line starts whole. No file: none.
func (w *Output) Written() (map[string]bool, error) {
	ids := map[string]bool{}
	if w.f == nil {
		return ids, nil
	}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		// A result line may be megabytes; its run id comes first. A line
		// without its newline is the last write, perhaps cut short: it
		// holds its run's result only if it is whole JSON.
		const head = 4 << 10
		line, err := ReadLineHead(r, head)
		whole := err == nil || len(line) < head && json.Valid(line)
		if id := leadingRunID(line); id != "" && whole {
			ids[id] = true
		}
		if err == io.EOF {
			if len(line) > 0 {
				w.mu.Lock()
				_, err = w.f.Write([]byte{'\n'})
				w.mu.Unlock()
				if err != nil {
					return nil, fmt.Errorf("--output: %w", err)
				}
			}
			return ids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--output: %w", err)
		}
	}
}

// ReadLineHead reads one line, to its end however long, and returns at
// most its first max bytes (with its newline when they hold it): what a
// reader of lines it does not control (a result file, a person's answer)
// keeps of each.
func ReadLineHead(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line) < max {
			line = append(line, chunk[:min(len(chunk), max-len(line))]...)
		}
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// leadingRunID is the run id a result line begins with ({"run_id":"…",
// as RunResult encodes), read from the line's head alone; "" if none.
func leadingRunID(head []byte) string {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	if t, err := d.Token(); err != nil || t != "run_id" {
		return ""
	}
	id, _ := d.Token()
	s, _ := id.(string)
	return s
}

// Write writes a run's result line (a Runner's Result hook). Its first
// error is kept for Err.
func (w *Output) Write(res *engine.RunResult) {
	if w.w == nil {
		return
	}
	// Not json.Marshal: it would write each <, > and & of an agent's
	// output as six bytes (\u003c), and a result line is no HTML.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(res)
	if err == nil {
		w.mu.Lock()
		_, err = w.w.Write(b.Bytes())
		w.mu.Unlock()
	}
	if err != nil {
		w.mu.Lock()
		if w.first == nil {
			w.first = err
		}
		w.mu.Unlock()
	}
}

// Err is the first error writing a result, if any.
func (w *Output) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// Close closes the file, if any.
func (w *Output) Close() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}

var _ io.Closer = (*Output)(nil)
