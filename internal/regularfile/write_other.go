//go:build !linux

package regularfile

// renameChecked is not done here: the caller renames after its check.
func renameChecked(tmp, path string) (done bool, err error) { return false, nil }
