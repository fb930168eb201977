package runs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ResolveWorkspace makes a run's workspace absolute (the current
// directory when dir is "") and checks it is a directory; its errors name
// --workspace.
func ResolveWorkspace(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("cannot tell the current directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--workspace %s: %w", abs, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--workspace %s is not a directory", abs)
	}
	return abs, nil
}
