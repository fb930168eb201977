//go:build !linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// Outside Linux the sandbox is not enforced: it is Landlock, namespaces
// and seccomp, which macOS has none of (its own sandbox-exec profiles are
// deprecated, and would be a second implementation to keep equal to this
// one). A step whose sandbox is required fails before its agent is
// spawned; one with required: false runs unconfined with a warning, as on
// a Linux kernel without Landlock.

// errNeedsLinux is Command's error here, wrapping ErrNeedsLinux.
var errNeedsLinux = fmt.Errorf("sandbox: %w; this is %s", ErrNeedsLinux, runtime.GOOS)

// probe reports that nothing can be enforced, and why.
func probe() Report {
	return Report{Problems: []string{fmt.Sprintf("%v; this is %s", ErrNeedsLinux, runtime.GOOS)}}
}

// launchOf refuses every spec: see errNeedsLinux.
func launchOf(launcher string, launcherArgs []string, spec Spec) (Launch, error) {
	return Launch{}, errNeedsLinux
}

// Main is the launcher, which cannot confine anything here: it starts
// nothing, says why, and returns LaunchFailed. acpflow never starts it
// outside Linux (Command fails first); the acpflow-sandbox binary of a
// macOS release is this.
func Main(args []string) int {
	fmt.Fprintf(os.Stderr, "acpflow sandbox: %v\n", errNeedsLinux)
	return LaunchFailed
}

// socketpair is never needed here: Command refuses every spec first.
func socketpair() (*os.File, *os.File, error) { return nil, nil, errNeedsLinux }

// receiveListener is never reached here: Command refuses every spec.
func receiveListener(back *os.File) (*os.File, error) {
	back.Close()
	return nil, errNeedsLinux
}
