package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// gitBinary finds the user's git on every call rather than once per
// process, so a PATH change (and the tests' PATH without git) is honoured.
func gitBinary() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", ErrNoGit
	}
	return p, nil
}

// baseConfig is passed to every git command acpflow runs (after the
// configuration files, so it wins over them). acpflow's own bookkeeping
// must not run hooks, the user's or any planted where git looks for them
// (core.hooksPath covers every hook: pre-commit, post-commit,
// post-checkout, post-index-change, reference-transaction), must not start
// an automatic gc (it takes repository-wide locks that the other runs of a
// batch then trip on), must not ask for a signing key passphrase, and must
// not start an fsmonitor daemon per worktree. The untracked cache and the
// split index are off so that what acpflow's git writes is a plain index.
// A submodule is never recursed into: its git would read its own .git.
var baseConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "commit.gpgSign=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.untrackedCache=false",
	"-c", "core.splitIndex=false",
	"-c", "submodule.recurse=false",
}

// keptGitEnv are the GIT_* variables of acpflow's environment that its git
// keeps: where the user's own configuration and git's programs are (a CI
// job or a test sets them on purpose). Every other GIT_* variable is
// dropped: they redirect git to another repository, index or object store
// (GIT_DIR, GIT_INDEX_FILE, ...: inherited from a parent git, acpflow
// started from a hook, they would make every command act on the wrong
// repository), add configuration (GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT)
// or name a program to run (GIT_EXTERNAL_DIFF, GIT_PAGER, GIT_EDITOR,
// GIT_SSH_COMMAND, GIT_ASKPASS).
var keptGitEnv = []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH"}

// gitEnv is the environment of every git command: acpflow's (the user's;
// no agent writes it), without GIT_* variables but keptGitEnv, in the C
// locale (so messages can be matched), never prompting on a terminal (a
// batch has nobody to answer), and without optional locks (a `git status`
// acpflow runs must not take the index lock of the user's checkout);
// extra (what acpflow sets) comes last.
func gitEnv(extra ...string) []string {
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !slices.Contains(keptGitEnv, name) ||
			name == "LC_ALL" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C", "LANGUAGE=", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	return append(env, extra...)
}

// gitError is a failed git command: what acpflow asked and what git said.
type gitError struct {
	args   []string
	dir    string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s (in %s): %s", strings.Join(e.args, " "), e.dir, msg)
}

func (e *gitError) Unwrap() error { return e.err }

// run runs git -C dir args... and returns its standard output.
func run(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	bin, err := gitBinary()
	if err != nil {
		return nil, err
	}
	full := append(append([]string{"--no-pager", "-C", dir}, baseConfig...), args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = gitEnv(env...)
	// Ending git with a kill would leave its work half done: a worktree
	// "initializing" forever, an index.lock. On SIGTERM git removes its own
	// junk and locks; it is killed only if it has not exited soon after.
	stopGently(cmd)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Started as acpflow's own helper: an agent's teardown must not
	// sweep it as a stray (procgroup.RunOwn).
	if err := procgroup.RunOwn(cmd); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s (in %s): %w", strings.Join(args, " "), dir, ctx.Err())
		}
		return stdout.Bytes(), &gitError{args: args, dir: dir, stderr: stderr.String(), err: err}
	}
	return stdout.Bytes(), nil
}

// stderrOf is what git said when err is a failed git command, else "".
func stderrOf(err error) string {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.stderr
	}
	return ""
}

// splitZ splits git's NUL-terminated output.
func splitZ(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}
