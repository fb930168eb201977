package regularfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// NotReplacedError says that Write refused a path: something other than a
// regular file is there, which a rename would replace.
type NotReplacedError struct {
	Path string
	Kind string // "a symbolic link", "a character device", …
}

func (e *NotReplacedError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: it is not replaced (write to a new path or over a regular file)", e.Path, e.Kind)
}

// testHookRename, when set (by tests), runs after the last check of path
// and before the rename onto it: the window in which only the rename
// itself can catch a swap.
var testHookRename func(path string)

// Write writes path whole, with mode 0600, through a temporary file beside
// it renamed into place once written, so that a reader (or a crash) never
// sees half a file. Only a new path or a regular file is written: a
// symlink, a device, a named pipe, a socket or a directory at path is
// refused (*NotReplacedError) and left as it is. The temporary file never
// outlives Write.
//
// # Notes
//
// Where the kernel can (Linux renameat2), the rename cannot land on
// anything else put there after the check: a new path is renamed with
// RENAME_NOREPLACE, and a regular file is exchanged with the new one, the
// old one checked once it is out of the way and exchanged back if it is
// not a regular file. Elsewhere the check and the rename are two steps.
func Write(path string, write func(*os.File) error) error {
	if err := replaceable(path); err != nil {
		return err
	}
	fh, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := fh.Name()
	stranded := false
	defer func() {
		if !stranded {
			os.Remove(tmp) // after a rename: the name of the old file, or nothing
		}
	}()
	err = write(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := renameOnto(tmp, path); err != nil {
		var nr *NotReplacedError
		var se *strandedError
		stranded = errors.As(err, &se)
		if errors.As(err, &nr) {
			return err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// strandedError: what was at path could not be put back from tmp, where it
// is left, never removed.
type strandedError struct {
	tmp, path string
	err       error
}

func (e *strandedError) Error() string {
	return fmt.Sprintf("what was at %s is now at %s and could not be put back: %v", e.path, e.tmp, e.err)
}

// replaceable is nil when path does not exist or is a regular file.
func replaceable(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("write %s: %w", path, err)
	case !st.Mode().IsRegular():
		return &NotReplacedError{Path: path, Kind: Kind(st.Mode())}
	}
	return nil
}

// renameOnto renames tmp onto path, checking path first.
func renameOnto(tmp, path string) error {
	if err := replaceable(path); err != nil {
		return err
	}
	if testHookRename != nil {
		testHookRename(path)
	}
	if done, err := renameChecked(tmp, path); done {
		return err
	}
	return os.Rename(tmp, path)
}
