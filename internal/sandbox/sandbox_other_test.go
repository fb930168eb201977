//go:build !linux

package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// Outside Linux a sandbox is never enforced: Command refuses every valid
// spec with an error naming the system, and the launcher starts nothing.
// (Not run on this project's Linux CI; `GOOS=darwin go vet` compiles it.)
func TestOutsideLinuxNoSandboxIsEnforced(t *testing.T) {
	dir := t.TempDir()
	_, err := Command("/usr/local/bin/acpflow-sandbox", nil, Spec{Cwd: dir, TmpDir: dir, Home: dir}, "/bin/echo", nil)
	if !errors.Is(err, ErrNeedsLinux) || !strings.Contains(err.Error(), "this is ") {
		t.Errorf("Command: %v, want ErrNeedsLinux naming this system", err)
	}
	if len(Probe().Problems) == 0 {
		t.Error("Probe reports no problem")
	}
	if code := Main([]string{"{}", "/bin/echo"}); code != LaunchFailed {
		t.Errorf("Main returned %d, want %d", code, LaunchFailed)
	}
}
