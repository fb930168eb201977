package regularfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameChecked renames tmp onto path so that it lands only on a new path
// or a regular file, whatever was put at path since it was checked; done
// is false when the file system cannot (renameat2 unsupported), and the
// caller renames plainly.
func renameChecked(tmp, path string) (done bool, err error) {
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	case !errors.Is(err, unix.EEXIST):
		return true, &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	// Something is at path: swap it out, look at it, swap back if it is
	// not a regular file.
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	case err != nil:
		return true, &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	st, err := os.Lstat(tmp)
	if err == nil && st.Mode().IsRegular() {
		return true, nil // the old file is at tmp, which the caller removes
	}
	if xerr := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); xerr != nil {
		return true, &strandedError{tmp: tmp, path: path, err: xerr}
	}
	if err != nil {
		return true, err
	}
	return true, &NotReplacedError{Path: path, Kind: Kind(st.Mode())}
}
