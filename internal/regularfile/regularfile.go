// Package regularfile reads the files a user names (workflows, policies,
// WASM modules) within a size bound, refusing anything that is not a
// regular file: a FIFO with no writer would hang a plain open, and
// /dev/zero would be read until memory ran out. It writes the files acpflow
// makes (Write) only to a new path or over a regular file: renamed over a
// device node or a symlink, a write would replace it.
package regularfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/acpflow/acpflow/internal/bytesize"
)

// NotRegularError says that a path names something other than a regular file.
type NotRegularError struct {
	Kind string // "a directory", "a named pipe", …
}

func (e *NotRegularError) Error() string { return "not a regular file (" + e.Kind + ")" }

// TooLargeError says that a file is over its size limit.
type TooLargeError struct {
	Size  int64 // -1 when the file grew past the limit while it was read
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return "the file grew past the limit of " + bytesize.Format(e.Limit) + " while it was read"
	}
	return fmt.Sprintf("%d bytes, over the limit of %s", e.Size, bytesize.Format(e.Limit))
}

// Read reads the regular file at path, of at most limit bytes.
//
// # Notes
//
// The file is opened with O_NONBLOCK and checked with fstat before anything
// is read, and the size is checked again while reading, for a file that
// grows after the fstat. Errors are *NotRegularError, *TooLargeError, or
// the open's or read's own.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, &NotRegularError{Kind: Kind(st.Mode())}
	case st.Size() > limit:
		return nil, &TooLargeError{Size: st.Size(), Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, &TooLargeError{Size: -1, Limit: limit}
	}
	return b, nil
}

// Kind names what a file mode is, for errors: "a directory", "a named
// pipe", "a socket", "a character device", "a device", "a symbolic link"
// (of an Lstat), else "not a plain file".
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeDir != 0:
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a plain file"
}
