//go:build linux

package procgroup

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// agentThreads is how many threads an idlethreads helper keeps, besides
// the Go runtime's own: a multi-threaded agent.
const agentThreads = 6

// idleThreads is a multi-threaded agent that does nothing: it holds
// agentThreads locked threads and exits at EOF on stdin.
func idleThreads() {
	for range agentThreads {
		go func() {
			runtime.LockOSThread()
			select {}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// orphaner is an agent that, from a thread other than its main one,
// starts a shell that leaves a setsid sleep behind and exits (the sleep
// is orphaned, and re-parented to acpflow), writes the sleep's pid to
// orphan.txt, and exits at EOF on stdin.
func orphaner() {
	onOtherThread(func(int) {
		exec.Command("/bin/sh", "-c", `setsid sleep 1000 & echo $! > orphan.tmp; mv orphan.tmp orphan.txt`).Run()
	}, make(chan struct{}))
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// onOtherThread runs f on an OS thread other than the process's main one
// (with its thread id), and keeps that thread until release is closed:
// what f starts is that thread's child.
func onOtherThread(f func(tid int), release <-chan struct{}) {
	ran := make(chan struct{})
	var try func()
	try = func() {
		runtime.LockOSThread()
		if syscall.Gettid() == os.Getpid() {
			// The main thread: hold it, so the next try gets another.
			go try()
			<-ran
			runtime.UnlockOSThread()
			return
		}
		f(syscall.Gettid())
		close(ran)
		<-release // and end the thread: the goroutine exits locked
	}
	go try()
	<-ran
}

// childrenOf lists the children of thread tid of this process.
func childrenOf(tid int) map[int]bool {
	b, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/children")
	out := map[int]bool{}
	for _, f := range bytes.Fields(b) {
		pid, _ := strconv.Atoi(string(f))
		out[pid] = true
	}
	return out
}

// waitReparented waits until pid's parent is this process.
func waitReparented(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, ok := readProc(pid); ok && p.ppid == os.Getpid() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d was never re-parented to this process", pid)
		}
	}
}

// pidIn reads a pid written to a file in dir.
func pidIn(t *testing.T, dir, name string) (int, uint64) {
	t.Helper()
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, name)))
	return pid, startOf(pid)
}

// startShellOnOtherThread is startShell from a thread of this process
// other than its main one, whose children file a walk for a teardown does
// not read: the child is found as the root of its walk.
func startShellOnOtherThread(t *testing.T, dir, script string) *Child {
	t.Helper()
	var c *Child
	var err error
	var thread int
	release := make(chan struct{})
	onOtherThread(func(tid int) {
		thread = tid
		c, err = Start(Spec{Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	}, release)
	t.Cleanup(func() { close(release) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Teardown(Ladder{EOFGrace: time.Millisecond, TermGrace: time.Millisecond})
		assertGroupGone(t, c.Pid())
	})
	if !childrenOf(thread)[c.Pid()] {
		t.Fatalf("the child %d is not a child of thread %d, which started it: the test proves nothing", c.Pid(), thread)
	}
	return c
}

// TestATeardownSweepsItsOwnAndLeavesAnotherLiveChildsAlone: with two live
// children, A's teardown kills A's setsid grandchild (below A, out of its
// group) and A's orphan (re-parented to acpflow), and leaves B, B's child
// and B's daemon (a setsid double fork re-parented to acpflow, carrying
// B's marker) running, not even stopped; B's teardown then kills the
// daemon. A's teardown reads A's subtree and acpflow's orphans, not B's
// subtree: each would be missed, or wrongly taken, with another scope. A
// is started from another thread than acpflow's main one.
// Class of input: where a live child's processes can be (its subtree,
// acpflow's orphans), for the child torn down and for another.
func TestATeardownSweepsItsOwnAndLeavesAnotherLiveChildsAlone(t *testing.T) {
	needSubreaper(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	b := startShell(t, dirB, `sleep 1000 & echo $! > kid.txt; (setsid sh -c 'echo $$ > daemon.txt; exec sleep 1000' &); cat >/dev/null`)
	a := startShellOnOtherThread(t, dirA, `setsid sleep 1000 & echo $! > gc.txt; (setsid sleep 1000 & echo $! > orphan.txt); cat >/dev/null`)
	gc, gcStart := pidIn(t, dirA, "gc.txt")
	orphan, orphanStart := pidIn(t, dirA, "orphan.txt")
	kid, kidStart := pidIn(t, dirB, "kid.txt")
	daemon, daemonStart := pidIn(t, dirB, "daemon.txt")
	waitReparented(t, orphan)
	waitReparented(t, daemon)
	if subtreeReads() {
		// The walk for A reads A's subtree and acpflow's orphans, not what
		// is below B; the whole walk reads it all.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, all := keysOf(subtreeOf(a)), keysOf(subtree())
			want := []procKey{{a.pid, a.start}, {gc, gcStart}, {orphan, orphanStart}, {daemon, daemonStart}}
			ok := !got[procKey{kid, kidStart}] && all[procKey{kid, kidStart}]
			for _, k := range want {
				ok = ok && got[k] && all[k]
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the walk for A read %v, the whole walk %v; want %v in both and B's child %d in the whole only", got, all, want, kid)
			}
		}
	}
	rep := a.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	assertPidGone(t, gc)
	assertPidGone(t, orphan)
	assertNoneMarked(t, a.Marker())
	if rep.Escaped < 2 {
		t.Errorf("A's teardown counts %d escaped, want its grandchild and its orphan", rep.Escaped)
	}
	for _, k := range []procKey{{b.pid, b.start}, {kid, kidStart}, {daemon, daemonStart}} {
		if p, ok := readProc(k.pid); !ok || p.start != k.start || p.dead() || p.state == 'T' {
			t.Errorf("B's process %d was touched by A's teardown (state %c)", k.pid, p.state)
		}
	}
	b.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	assertPidGone(t, kid)
	assertPidGone(t, daemon)
	assertNoneMarked(t, b.Marker())
}

// TestAnOrphanIsFoundOnAcpflowsMainThread: an agent started from another
// thread of acpflow than its main one leaves an orphan behind, forked
// (through a shell) from another thread than the agent's main one; it is
// re-parented to acpflow's main thread, whose children are all a
// teardown's walk lists of acpflow's (leaderReaps), and the agent's
// teardown, beside another live child, finds and kills it. Class of input:
// the threads an orphan's line came down, in the agent and in acpflow.
func TestAnOrphanIsFoundOnAcpflowsMainThread(t *testing.T) {
	needSubreaper(t)
	if !leaderReaps() {
		t.Skip("before Linux 3.19 an orphan goes to the thread that forked its line")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := startShell(t, t.TempDir(), `cat >/dev/null`)
	dir := t.TempDir()
	var a *Child
	var startErr error
	var thread int
	release := make(chan struct{})
	onOtherThread(func(tid int) {
		thread = tid
		a, startErr = Start(Spec{Path: exe, Args: []string{"-test.run=^$"}, Dir: dir,
			Env: []string{"PATH=/usr/bin:/bin", helperVar + "=orphaner"}})
	}, release)
	defer close(release)
	if startErr != nil {
		t.Fatal(startErr)
	}
	defer func() {
		a.Teardown(Ladder{EOFGrace: time.Millisecond, TermGrace: time.Millisecond})
		assertGroupGone(t, a.Pid())
	}()
	if !childrenOf(thread)[a.Pid()] {
		t.Fatalf("the agent %d is not a child of thread %d, which started it: the test proves nothing", a.Pid(), thread)
	}
	orphan, orphanStart := pidIn(t, dir, "orphan.txt")
	waitReparented(t, orphan)
	if !childrenOf(os.Getpid())[orphan] {
		t.Errorf("the orphan %d is not listed by this process's main thread", orphan)
	}
	a.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	if Alive(orphan, orphanStart) {
		t.Errorf("the agent's orphan %d outlived its teardown", orphan)
		syscall.Kill(orphan, syscall.SIGKILL)
	}
	assertNoneMarked(t, a.Marker())
	select {
	case <-other.Exited():
		t.Error("the other child was killed")
	default:
	}
}
