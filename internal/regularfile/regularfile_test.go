package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestReadRefusesWhatIsNotABoundedRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		kind string // "" for TooLarge, "ok" for a read
	}{
		{fifo, "a named pipe"}, {dir, "a directory"}, {"/dev/zero", "a character device"},
		{big, ""}, {ok, "ok"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(tc.path, 100); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a hang guard, not a measurement
			t.Fatalf("%s: Read hung", tc.path)
		}
		var nr *NotRegularError
		var tl *TooLargeError
		switch {
		case tc.kind == "ok":
			if err != nil {
				t.Errorf("%s: %v", tc.path, err)
			}
		case tc.kind == "":
			if !errors.As(err, &tl) || tl.Size != 101 {
				t.Errorf("%s: err = %v, want too large (101 bytes)", tc.path, err)
			}
		default:
			if !errors.As(err, &nr) || nr.Kind != tc.kind {
				t.Errorf("%s: err = %v, want not regular (%s)", tc.path, err, tc.kind)
			}
		}
	}
}
