package cli

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/acpflow/acpflow/internal/regularfile"
)

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
		return nil, fmt.Errorf("--inputs %s is %s, not a JSONL file or a pipe", path, regularfile.Kind(m))
	}
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
