//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// waitingFor returns the launcher waiting for l's kind of launch, once
// one is (a hang guard of a minute: one starts in milliseconds).
func waitingFor(t *testing.T, l Launch) *waitingLauncher {
	t.Helper()
	for range 6000 {
		waiting.mu.Lock()
		w := waiting.idle[l.key()]
		waiting.mu.Unlock()
		if w != nil {
			return w
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no launcher was started ahead")
	return nil
}

// agentFor is the test binary as an agent doing op in spec's sandbox.
func agentFor(t *testing.T, spec Spec, op ...string) Launch {
	t.Helper()
	self, _ := os.Executable()
	l, err := Command(self, []string{"sandbox-launch"}, spec, self, append([]string{"sandbox-agent"}, op...))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// finish waits for the agent c runs and returns its stdout.
func finish(t *testing.T, c *procgroup.Child) string {
	t.Helper()
	c.Stdin().Close()
	out, _ := io.ReadAll(c.Stdout())
	rep := c.Teardown(procgroup.Ladder{EOFGrace: time.Minute, TermGrace: time.Second})
	if rep.Exit != "exit status 0" {
		t.Fatalf("%s: %s", rep.Exit, c.Stderr().String())
	}
	return strings.TrimSpace(string(out))
}

// A launcher is started ahead after each sandboxed start, and the next
// start with the same namespaces is served by it: the agent gets its own
// environment, however large, which never was the waiting launcher's,
// and a spec far past what a command line holds.
func TestTheNextAgentStartsInALauncherStartedAhead(t *testing.T) {
	f := newFixture(t)
	DismissWaiting()
	t.Cleanup(DismissWaiting)
	spec := f.spec()
	for i := range 20000 { // ~1 MB of paths: a command line held 128 KiB
		spec.Deny = append(spec.Deny, filepath.Join(f.home, "gone", strconv.Itoa(i)))
	}
	first := finish(t, mustStart(t, agentFor(t, spec, "env", "BIG"), f.env(spec, "BIG=x")))
	if !strings.HasPrefix(first, "1 ") {
		t.Fatalf("the first agent printed %q, want its BIG of length 1", first)
	}
	l := agentFor(t, spec, "env", "BIG")
	ahead := waitingFor(t, l)
	if environ, _ := os.ReadFile("/proc/" + strconv.Itoa(ahead.child.Pid()) + "/environ"); bytes.Contains(environ, []byte("BIG=")) || bytes.Contains(environ, []byte("HOME=")) {
		t.Errorf("the waiting launcher's environment holds more than procgroup's marker: %q", environ)
	}
	big := "BIG=" + strings.Repeat("y", 100<<10) // past a pipe's buffer, within exec's bound on one string
	c := mustStart(t, l, f.env(spec, big))
	if c.Pid() != ahead.child.Pid() {
		t.Errorf("the second agent ran under launcher %d, not the one started ahead (%d)", c.Pid(), ahead.child.Pid())
	}
	got := strings.Fields(finish(t, c)) // len(BIG), pid, ppid
	if len(got) != 3 || got[0] != strconv.Itoa(100<<10) || got[2] != "1" {
		t.Errorf("the second agent printed %q, want its BIG's length %d and the launcher, PID 1, as its parent", got, 100<<10)
	}
	f.assertNothingLeft(t)
}

// A launcher that waits for nothing is gone once DismissWaiting returns,
// and one killed while it waited is not handed an agent.
func TestWaitingLaunchersLeaveNothingBehind(t *testing.T) {
	f := newFixture(t)
	DismissWaiting()
	t.Cleanup(DismissWaiting)
	l := agentFor(t, f.spec(), "env", "HOME")
	finish(t, mustStart(t, l, f.env(f.spec())))
	ahead := waitingFor(t, l)
	ahead.child.Kill()
	<-ahead.child.Exited()
	c := mustStart(t, l, f.env(f.spec()))
	if c.Pid() == ahead.child.Pid() {
		t.Fatal("an agent was handed to a launcher killed while it waited")
	}
	finish(t, c)
	pid := waitingFor(t, l).child.Pid()
	DismissWaiting()
	if alive(pid) {
		t.Errorf("the launcher started ahead (pid %d) outlived DismissWaiting", pid)
	}
	waiting.mu.Lock()
	n := len(waiting.idle) + len(waiting.filling)
	waiting.mu.Unlock()
	if n != 0 {
		t.Errorf("%d launchers still waiting or starting after DismissWaiting", n)
	}
}

func mustStart(t *testing.T, l Launch, env []string) *procgroup.Child {
	t.Helper()
	c, err := l.Start(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
