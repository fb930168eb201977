//go:build linux

package procgroup

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startHelper starts a helper process (never this test process) in a group
// of its own, and makes sure it and its group are gone when the test ends.
func startHelper(t *testing.T, env []string, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		assertGroupGone(t, cmd.Process.Pid)
	})
	return cmd
}

func procOf(t *testing.T, pid int) Proc {
	t.Helper()
	p, ok := readProc(pid)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return Proc{PID: pid, PGID: p.pgid, StartTicks: p.start}
}

// killAtEnd SIGKILLs a helper's stray process (by pid and start time) at the
// end of the test, and proves it gone.
func killAtEnd(t *testing.T, p Proc) {
	t.Cleanup(func() {
		if Alive(p.PID, p.StartTicks) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		waitKeysGone([]procKey{{p.PID, p.StartTicks}})
		assertPidGone(t, p.PID)
	})
}

// TestReapSparesAnUnrelatedGroupThatReusedARecordedPid is the case:
// the recorded agent is long dead, its pid now names the group of an
// unrelated double-forked daemon whose leader has exited. The old rule
// ("leader gone: the group is ours") killed the daemon.
func TestReapSparesAnUnrelatedGroupThatReusedARecordedPid(t *testing.T) {
	dir := t.TempDir()
	// The middle process starts a session (pid = pgid = sid), starts the
	// daemon in it, and exits: the group lives on without its leader.
	startHelper(t, nil, `setsid /bin/sh -c 'sleep 1000 & echo $! > `+dir+`/daemon; echo $$ > `+dir+`/leader' & wait`)
	leader, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "leader")))
	daemonPid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "daemon")))
	daemon := procOf(t, daemonPid)
	killAtEnd(t, daemon)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, ok := readProc(leader); !ok || p.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon's parent never exited")
		}
	}
	if daemon.PGID != leader {
		t.Fatalf("daemon's group = %d, want %d", daemon.PGID, leader)
	}
	// The store recorded an agent with the leader's pid, from an older
	// process (another start time), and an acpflow that is gone.
	killed := Leftovers{Owner: 1, OwnerStartTicks: 1, Procs: []Proc{{PID: leader, PGID: leader, StartTicks: 1}}}.Reap()
	if len(killed) != 0 {
		t.Errorf("Reap killed %+v", killed)
	}
	if !Alive(daemon.PID, daemon.StartTicks) {
		t.Error("Reap killed an unrelated daemon in a group whose id is a recorded pid")
	}
}

func TestReapKillsRecordedAndMarkedProcessesAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	owner := OwnerMarker(4242, 777)
	// Carries a marker of the dead acpflow: the shell (exec'd into sleep)
	// and its setsid child, which left the group and was never recorded.
	marked := startHelper(t, []string{MarkerVar + "=" + owner + "3"},
		`setsid sleep 1000 & echo $! > `+dir+`/setsid; exec sleep 1000`)
	setsidPid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "setsid")))
	escaped := procOf(t, setsidPid)
	killAtEnd(t, escaped)
	recorded := startHelper(t, nil, `exec sleep 1000`)
	// Another acpflow's child, and a process recorded with another start time.
	other := startHelper(t, []string{MarkerVar + "=" + OwnerMarker(4242, 778) + "3"}, `exec sleep 1000`)
	reused := startHelper(t, nil, `exec sleep 1000`)
	time.Sleep(50 * time.Millisecond) // let the shells exec

	rec, reu := procOf(t, recorded.Process.Pid), procOf(t, reused.Process.Pid)
	reu.StartTicks++
	killed := Leftovers{Owner: 4242, OwnerStartTicks: 777, Procs: []Proc{rec, reu}}.Reap()
	want := map[int]bool{marked.Process.Pid: true, escaped.PID: true, rec.PID: true}
	for _, p := range killed {
		if !want[p.PID] {
			t.Errorf("killed process %d, which it cannot prove it started", p.PID)
		}
		delete(want, p.PID)
	}
	for pid := range want {
		t.Errorf("process %d was not killed", pid)
	}
	for _, c := range []*exec.Cmd{marked, recorded} {
		c.Wait()
		assertPidGone(t, c.Process.Pid)
	}
	assertPidGone(t, escaped.PID)
	for _, c := range []*exec.Cmd{other, reused} {
		if p, ok := readProc(c.Process.Pid); !ok || p.state == 'Z' {
			t.Errorf("process %d was killed", c.Process.Pid)
		}
	}
}

// TestADaemonDiesWithItsOwnStepWhileAnotherChildLives: the daemon's parent
// exits at once, so no scan sees it below its child; with another child
// live, an unmarked orphan could not be attributed and lived until the last
// teardown (the issue: 36 daemons alive with 11 of 12 runs done).
func TestADaemonDiesWithItsOwnStepWhileAnotherChildLives(t *testing.T) {
	needSubreaper(t)
	other := startShell(t, t.TempDir(), `cat >/dev/null`)
	dir := t.TempDir()
	c := startShell(t, dir, `(setsid sleep 1000 & echo $! > gc.txt); cat >/dev/null; exit 0`)
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	rep := c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	assertPidGone(t, gc)
	if rep.Escaped < 1 {
		t.Errorf("escaped = %d, want the daemon counted", rep.Escaped)
	}
	select {
	case <-other.Exited():
		t.Error("the other child was killed")
	default:
	}
}

func TestEveryChildCarriesItsOwnMarker(t *testing.T) {
	dir := t.TempDir()
	a := startShell(t, dir, `echo "$`+MarkerVar+`" > a.txt; cat >/dev/null`)
	c, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", `echo "$` + MarkerVar + `" > b.txt; cat >/dev/null`}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", MarkerVar + "=forged"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Teardown(Ladder{EOFGrace: time.Second}); assertGroupGone(t, c.Pid()) }()
	ma, mb := waitFile(t, filepath.Join(dir, "a.txt")), waitFile(t, filepath.Join(dir, "b.txt"))
	if ma != a.Marker() || mb != c.Marker() || ma == mb || ma == "" {
		t.Errorf("markers %q, %q; want %q, %q, distinct", ma, mb, a.Marker(), c.Marker())
	}
}

func TestOnDescendantRecordsASetsidGrandchildBeforeTeardownReturns(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var seen []Proc
	closed := false
	c, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", `setsid sleep 1000 & echo $! > gc.txt; cat >/dev/null`}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin"},
		OnDescendant: func(_ int, p Proc) {
			mu.Lock()
			defer mu.Unlock()
			if closed {
				t.Errorf("OnDescendant(%+v) after Teardown returned", p)
			}
			seen = append(seen, p)
		}})
	if err != nil {
		t.Fatal(err)
	}
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	want := procOf(t, gc)
	found := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range seen {
			if p.PID == want.PID && p.StartTicks == want.StartTicks {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !found(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never reported the setsid grandchild")
		}
	}
	rep := c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	mu.Lock()
	closed = true
	mu.Unlock()
	if rep.Descendants < 1 {
		t.Errorf("report counts %d descendants", rep.Descendants)
	}
	assertPidGone(t, gc)
	assertGroupGone(t, c.Pid())
	time.Sleep(2 * observeEvery)
}
