package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestInputsThatNeverEndAreRefusedAndAFIFOWaitsBoundedForAWriter(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "character device"},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing.jsonl"), "no such file"},
	} {
		if _, err := openInputs(c.path, time.Second); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("openInputs(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// No writer ever comes, so only the wait can end the open: the error,
	// not the time it took, is the verdict.
	_, err := openInputs(fifo, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no process opened for writing") {
		t.Errorf("a FIFO with no writer: %v", err)
	}

	// A writer that comes within the wait is read as a stream. The wait is
	// a minute (the open returns when the writer comes), so a loaded
	// machine's slow writer is not taken for none.
	go func() {
		time.Sleep(100 * time.Millisecond)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.WriteString("{\"n\": 1}\n")
		w.Close()
	}()
	in, err := openInputs(fifo, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	data, _ := io.ReadAll(in)
	if in.regular || !bytes.Equal(data, []byte("{\"n\": 1}\n")) {
		t.Errorf("read %q from the FIFO (regular %v)", data, in.regular)
	}
}
