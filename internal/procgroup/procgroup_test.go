//go:build linux

package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if helper := os.Getenv(helperVar); helper != "" {
		runHelper(helper) // this binary re-executed as a helper process
	}
	// As in the acpflow binary: orphans of the children come back to us,
	// and the process table is read as this process's subtree. The suite
	// also runs with the whole table (PROCGROUP_WHOLE_TABLE=1) and without
	// the subreaper (PROCGROUP_NO_SUBREAPER=1, which reads the whole table
	// and skips the tests that need orphans to come back).
	if os.Getenv("PROCGROUP_NO_SUBREAPER") == "" {
		if err := EnableSubreaper(); err != nil {
			panic(err)
		}
	}
	wholeTable.Store(os.Getenv("PROCGROUP_WHOLE_TABLE") != "")
	os.Exit(m.Run())
}

// startShell starts sh -c script in dir, with stdin piped.
func startShell(t *testing.T, dir, script string) *Child {
	t.Helper()
	c, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Teardown(Ladder{EOFGrace: time.Millisecond, TermGrace: time.Millisecond})
		assertGroupGone(t, c.Pid())
	})
	return c
}

func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		for _, p := range snapshot() {
			if p.pgid == pgid && p.state != 'Z' {
				t.Errorf("process %d of group %d is still alive", p.pid, pgid)
			}
		}
	}
}

func assertPidGone(t *testing.T, pid int) {
	t.Helper()
	if p, ok := readProc(pid); ok && p.state != 'Z' {
		t.Errorf("process %d is still alive (state %c)", pid, p.state)
	}
}

// waitFile waits for a file to have content and returns it. The half
// minute is a hang guard: a shell writes it in milliseconds, a loaded
// machine may take a second or two to start one.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never written", path)
	return ""
}

func TestTeardownLetsACooperativeChildFlushEvenWithATinyTermGrace(t *testing.T) {
	dir := t.TempDir()
	// On EOF the child takes 300 ms to flush, then exits by itself.
	// The EOF grace is a minute (teardown returns when the child exits),
	// so the flush, not a loaded machine's pace, decides the tier.
	c := startShell(t, dir, `cat >/dev/null; sleep 0.3; echo flushed > flushed.txt; exit 0`)
	rep := c.Teardown(Ladder{EOFGrace: time.Minute, TermGrace: time.Millisecond})
	if rep.Tier != "eof" {
		t.Errorf("tier = %q, want eof", rep.Tier)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "flushed.txt")); err != nil || strings.TrimSpace(string(b)) != "flushed" {
		t.Errorf("the child's flush did not complete: %v %q", err, b)
	}
	assertGroupGone(t, c.Pid())
}

func TestTeardownSendsSIGTERMToAChildThatIgnoresEOF(t *testing.T) {
	dir := t.TempDir()
	c := startShell(t, dir, `trap 'echo term > term.txt; exit 0' TERM; echo ready > ready.txt; while :; do sleep 0.02; done`)
	waitFile(t, filepath.Join(dir, "ready.txt"))
	// The child never reads stdin, so the EOF grace always runs out; the
	// TERM grace is a minute, so the trap, not the machine's pace, ends it.
	rep := c.Teardown(Ladder{EOFGrace: 100 * time.Millisecond, TermGrace: time.Minute})
	if rep.Tier != "term" {
		t.Errorf("tier = %q, want term", rep.Tier)
	}
	if got := waitFile(t, filepath.Join(dir, "term.txt")); got != "term" {
		t.Errorf("term.txt = %q", got)
	}
	assertGroupGone(t, c.Pid())
}

func TestTeardownKillsATERMTrappingChildWithinBothGraces(t *testing.T) {
	dir := t.TempDir()
	c := startShell(t, dir, `trap '' TERM; echo ready > ready.txt; while :; do sleep 0.02; done`)
	waitFile(t, filepath.Join(dir, "ready.txt"))
	eof, term := 100*time.Millisecond, 150*time.Millisecond
	rep := c.Teardown(Ladder{EOFGrace: eof, TermGrace: term})
	if rep.Tier != "kill" {
		t.Errorf("tier = %q, want kill", rep.Tier)
	}
	if rep.Duration < eof+term {
		t.Errorf("teardown took %s, less than the graces %s: it did not wait", rep.Duration, eof+term)
	}
	if rep.Err != nil {
		t.Error(rep.Err)
	}
	assertGroupGone(t, c.Pid())
}

func TestTeardownKillsGrandchildrenInTheGroup(t *testing.T) {
	dir := t.TempDir()
	c := startShell(t, dir, `sleep 1000 & echo $! > gc.txt; cat >/dev/null; exit 0`)
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	// The shell exits on EOF, but its grandchild keeps the group alive.
	rep := c.Teardown(Ladder{EOFGrace: 100 * time.Millisecond, TermGrace: time.Minute})
	if rep.Tier != "term" {
		t.Errorf("tier = %q, want term (the sleeping grandchild outlives EOF)", rep.Tier)
	}
	assertPidGone(t, gc)
	assertGroupGone(t, c.Pid())
}

func TestTeardownKillsAGrandchildThatCalledSetsid(t *testing.T) {
	dir := t.TempDir()
	c := startShell(t, dir, `setsid sleep 1000 & echo $! > gc.txt; cat >/dev/null; exit 0`)
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	// setsid runs in the grandchild after the shell has written its pid:
	// wait for the move itself, not for a time a loaded machine outlasts.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, ok := readProc(gc); ok && p.pgid != c.Pid() {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("grandchild %d did not leave the group: %+v", gc, p)
		}
	}
	time.Sleep(2 * observeEvery) // the watcher's looks, as before a real teardown
	rep := c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	if rep.Escaped < 1 {
		t.Errorf("escaped = %d, want the setsid grandchild counted", rep.Escaped)
	}
	assertPidGone(t, gc)
	assertGroupGone(t, c.Pid())
}

func TestTeardownKillsADaemonWhoseParentExitedAtOnce(t *testing.T) {
	needSubreaper(t)
	dir := t.TempDir()
	// A double fork: the subshell starts a setsid sleeper and exits at once,
	// so the sleeper is re-parented before any scan can see its parent.
	c := startShell(t, dir, `(setsid sleep 1000 & echo $! > gc.txt); cat >/dev/null; exit 0`)
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	assertPidGone(t, gc)
	assertGroupGone(t, c.Pid())
}

func TestTeardownOfAChildThatAlreadyExited(t *testing.T) {
	c := startShell(t, t.TempDir(), `exit 7`)
	<-c.Exited()
	// Graces of a minute: a teardown that waited one out took a minute;
	// one that saw the child gone took far less on any load.
	rep := c.Teardown(Ladder{EOFGrace: time.Minute, TermGrace: time.Minute})
	if rep.Tier != "exited" && rep.Tier != "eof" {
		t.Errorf("tier = %q", rep.Tier)
	}
	if rep.Duration >= time.Minute {
		t.Errorf("teardown of a dead child took %s: it waited out a grace", rep.Duration)
	}
	var ee interface{ ExitCode() int }
	if !errors.As(c.ExitErr(), &ee) || ee.ExitCode() != 7 {
		t.Errorf("exit status = %v, want 7", c.ExitErr())
	}
}

func TestTeardownIsIdempotentAndConcurrent(t *testing.T) {
	c := startShell(t, t.TempDir(), `cat >/dev/null`)
	done := make(chan Report, 3)
	for i := 0; i < 3; i++ {
		go func() { done <- c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second}) }()
	}
	first := <-done
	for i := 0; i < 2; i++ {
		if r := <-done; r.Tier != first.Tier {
			t.Errorf("reports differ: %+v vs %+v", r, first)
		}
	}
}

func TestStderrIsCapturedAndBounded(t *testing.T) {
	c := startShell(t, t.TempDir(), `i=0; while [ $i -lt 3000 ]; do echo "line $i of the log padded to be a bit longer" >&2; i=$((i+1)); done; echo last-line >&2`)
	<-c.Exited()
	c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	s := c.Stderr().String()
	if len(s) > StderrLimit || len(s) < StderrLimit/2 {
		t.Errorf("kept %d bytes, want about %d", len(s), StderrLimit)
	}
	if got := c.Stderr().LastLines(1); got != "last-line" {
		t.Errorf("last line = %q", got)
	}
}

func TestParseStatHandlesParenthesesInTheCommandName(t *testing.T) {
	line := []byte("42 (we(ird) na)me) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0")
	p, ok := parseStat(42, line)
	if !ok || p.ppid != 1 || p.pgid != 42 || p.state != 'S' || p.start != 12345 {
		t.Errorf("parseStat = %+v, %v", p, ok)
	}
}

// BenchmarkSnapshot is the cost of one read of the process table, which
// teardown and the descendant watcher pay.
func BenchmarkSnapshot(b *testing.B) {
	for i := 0; i < b.N; i++ {
		snapshot()
	}
}

func TestTeardownOfAPlainChildReportsNoEscapedProcess(t *testing.T) {
	for i := 0; i < 5; i++ {
		c := startShell(t, t.TempDir(), `cat >/dev/null`)
		rep := c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
		if rep.Escaped != 0 {
			t.Fatalf("escaped = %d for a child that started nothing", rep.Escaped)
		}
		<-c.Exited()
		if c.ExitErr() != nil {
			t.Fatalf("the child's exit status was lost: %v", c.ExitErr())
		}
	}
}

// TestAChildBeingStartedIsNeverTakenForAnOrphan: between fork and
// registration a new child is acpflow's child but not yet a known one; a
// teardown that sweeps orphans at that moment must leave it alone.
func TestAChildBeingStartedIsNeverTakenForAnOrphan(t *testing.T) {
	c := startShell(t, t.TempDir(), `cat >/dev/null`)
	// A spawn under way: forked (a child of this process), not registered.
	end := registry.begin()
	starting := exec.Command("/bin/sleep", "30")
	if err := starting.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { starting.Process.Kill(); starting.Wait() }()
	c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	end()
	ticks, _ := StartTicks(starting.Process.Pid)
	if !Alive(starting.Process.Pid, ticks) {
		t.Error("the teardown's orphan sweep killed a child that was being started")
	}
}

func TestTeardownStopsWaitingForEOFOnceAnIgnoringChildIsIdle(t *testing.T) {
	dir := t.TempDir()
	c := startShell(t, dir, `trap 'exit 0' TERM; echo ready > ready.txt; sleep 1000 & wait`)
	waitFile(t, filepath.Join(dir, "ready.txt"))
	rep := c.Teardown(Ladder{EOFGrace: 2 * time.Minute, EOFIdle: 100 * time.Millisecond, TermGrace: time.Minute})
	if rep.Tier != "term" {
		t.Errorf("tier = %q, want term", rep.Tier)
	}
	// Far below the EOF grace (a hang guard, not a measurement: the idle
	// cut comes after 100 ms, a wait for the grace after two minutes).
	if rep.Duration > time.Minute {
		t.Errorf("teardown took %s: it waited for the EOF grace despite the idle child", rep.Duration)
	}
	assertGroupGone(t, c.Pid())
}

func TestTeardownGivesABusyChildItsEOFGraceDespiteEOFIdle(t *testing.T) {
	dir := t.TempDir()
	// On EOF the child works (CPU) for a while, well past the idle window,
	// then writes its result and exits.
	c := startShell(t, dir, `cat >/dev/null; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo flushed > flushed.txt; exit 0`)
	rep := c.Teardown(Ladder{EOFGrace: 30 * time.Second, EOFIdle: 50 * time.Millisecond, TermGrace: time.Millisecond})
	if rep.Tier != "eof" {
		t.Errorf("tier = %q after %s, want eof: a busy child was taken for idle", rep.Tier, rep.Duration)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "flushed.txt")); err != nil || strings.TrimSpace(string(b)) != "flushed" {
		t.Errorf("the child's work did not complete: %v %q", err, b)
	}
	if rep.Exit != "exit status 0" {
		t.Errorf("exit = %q, want exit status 0", rep.Exit)
	}
}

func TestAKillDuringTheLadderIsReportedAsKill(t *testing.T) {
	dir := t.TempDir()
	// The child notes the EOF the teardown sends: the kill comes once the
	// ladder runs (an event), not after a sleep a loaded machine could
	// outlast before the teardown has begun (a kill before it reads
	// "exited").
	c := startShell(t, dir, `trap '' TERM; echo ready > ready.txt; cat >/dev/null; echo eof > eof.txt; sleep 1000 & wait`)
	waitFile(t, filepath.Join(dir, "ready.txt"))
	done := make(chan Report, 1)
	go func() { done <- c.Teardown(Ladder{EOFGrace: 30 * time.Second, TermGrace: 30 * time.Second}) }()
	waitFile(t, filepath.Join(dir, "eof.txt"))
	c.Kill()
	rep := <-done
	if rep.Tier != "kill" {
		t.Errorf("tier = %q, want kill: the second interrupt killed the group", rep.Tier)
	}
	if rep.Exit != "signal: killed" {
		t.Errorf("exit = %q, want signal: killed", rep.Exit)
	}
	assertGroupGone(t, c.Pid())
}

// What a child writes to stdout as it exits reaches its reader even when
// the reader takes it after the teardown has reaped the child: an agent's
// last request must not be cut off by the pipe's close.
func TestTeardownLeavesTheChildsLastWordsToItsReader(t *testing.T) {
	c := startShell(t, t.TempDir(), `cat >/dev/null; head -c 60000 /dev/zero`)
	read := make(chan int)
	go func() {
		<-c.Exited()
		n, buf := 0, make([]byte, 1024)
		for {
			m, err := c.Stdout().Read(buf)
			n += m
			if err != nil {
				read <- n
				return
			}
			time.Sleep(2 * time.Millisecond) // a slow reader, still reading
		}
	}()
	c.Teardown(Ladder{EOFGrace: time.Minute, TermGrace: time.Minute})
	if n := <-read; n != 60000 {
		t.Errorf("the reader got %d of the 60000 bytes the child wrote before it exited", n)
	}
}
