//go:build linux

package procgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// outliveChild is codex-acp's shape at EOF: its child (the app-server)
// reads stdin to its end, idles a while (a flush), writes flushed.txt and
// exits; the leader then does what then says ("timer": waits out a long
// timer of its own, idle; "work": uses CPU for a while) and exits 0.
func outliveChild(then string) {
	child := exec.Command("/bin/sh", "-c", "echo ready > ready.txt; cat >/dev/null; sleep 0.3; echo flushed > flushed.txt")
	child.Stdin, child.Stderr = os.Stdin, os.Stderr
	if child.Run() != nil {
		os.Exit(3)
	}
	if then == "work" {
		for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); {
		}
		os.WriteFile("worked.txt", []byte("worked\n"), 0o644)
		os.Exit(0)
	}
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}

// startOutliver starts the outliveChild helper in dir and waits for its child.
func startOutliver(t *testing.T, dir, then string) *Child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(Spec{Path: exe, Args: []string{"-test.run=^$"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", helperVar + "=outlive " + then}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Teardown(Ladder{EOFGrace: time.Millisecond, TermGrace: time.Millisecond})
		assertGroupGone(t, c.Pid())
	})
	waitFile(t, filepath.Join(dir, "ready.txt"))
	return c
}

// TestEOFDoneAtCutsOnlyTheLeadersOwnTimer: a leader that, once its
// child has exited, only waits out a timer of its own is sent SIGTERM
// then, long before its EOF grace, and its child's idle flush (300 ms) is
// never cut short.
func TestEOFDoneAtCutsOnlyTheLeadersOwnTimer(t *testing.T) {
	dir := t.TempDir()
	c := startOutliver(t, dir, "timer")
	rep := c.Teardown(Ladder{EOFGrace: 2 * time.Minute, EOFDoneAt: 1, TermGrace: time.Minute})
	if rep.Tier != "term" {
		t.Errorf("tier = %q, want term", rep.Tier)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "flushed.txt")); err != nil || strings.TrimSpace(string(b)) != "flushed" {
		t.Errorf("the child's flush was cut short: %v %q", err, b)
	}
	// A hang guard, not a measurement: the early end comes a few looks
	// after the child's exit, the grace after two minutes.
	if rep.Duration > time.Minute {
		t.Errorf("teardown took %s: it waited out the leader's timer", rep.Duration)
	}
	assertGroupGone(t, c.Pid())
}

// TestEOFDoneAtLetsABusyLeaderFinish: a leader still using CPU after
// its child exited is working, not waiting on a timer: it exits by itself.
func TestEOFDoneAtLetsABusyLeaderFinish(t *testing.T) {
	dir := t.TempDir()
	c := startOutliver(t, dir, "work")
	rep := c.Teardown(Ladder{EOFGrace: 30 * time.Second, EOFDoneAt: 1, TermGrace: time.Millisecond})
	if rep.Tier != "eof" {
		t.Errorf("tier = %q after %s, want eof: a busy leader was taken for done", rep.Tier, rep.Duration)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "worked.txt")); err != nil || strings.TrimSpace(string(b)) != "worked" {
		t.Errorf("the leader's work did not complete: %v %q", err, b)
	}
	assertGroupGone(t, c.Pid())
}
