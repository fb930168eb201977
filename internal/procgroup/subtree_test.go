//go:build linux

package procgroup

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperVar re-executes this test binary as a helper process (TestMain):
// "threadforker" or "probe OUTSIDER-PID".
const helperVar = "PROCGROUP_TEST_HELPER"

// forkers is how many threads a helper forks from.
const forkers = 4

func runHelper(helper string) {
	switch mode, arg, _ := strings.Cut(helper, " "); mode {
	case "threadforker":
		threadForker()
	case "probe":
		outsider, _ := strconv.Atoi(arg)
		if err := probeSubtree(outsider); err != nil {
			fmt.Println("FAIL:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "idlethreads":
		idleThreads()
	case "orphaner":
		orphaner()
	case "outlive":
		outliveChild(arg)
	}
	fmt.Fprintln(os.Stderr, "unknown helper", helper)
	os.Exit(2)
}

// forkFromThreads starts n processes from each of forkers goroutines, each
// locked to its own OS thread while all of them fork, so the children's
// parents are forkers distinct threads (Go forks from the calling thread).
func forkFromThreads(n int, setsid bool, name string, args ...string) []*exec.Cmd {
	var mu sync.Mutex
	var cmds []*exec.Cmd
	var locked, done sync.WaitGroup
	locked.Add(forkers)
	done.Add(forkers)
	for range forkers {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			locked.Done()
			locked.Wait()
			defer done.Done()
			for range n {
				cmd := exec.Command(name, args...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
				if cmd.Start() == nil {
					mu.Lock()
					cmds = append(cmds, cmd)
					mu.Unlock()
				}
			}
			// Keep the thread, so the children stay its own.
			select {}
		}()
	}
	locked.Wait()
	for {
		mu.Lock()
		k := len(cmds)
		mu.Unlock()
		if k == forkers*n {
			return cmds
		}
		time.Sleep(time.Millisecond)
	}
}

// threadForker is an agent's descendant that forks from several threads,
// as agents in Go, Rust or node do: once each of forkers threads has
// started setsid sleeps it writes ./ready, and then starts more from as
// many other threads, so a sweep meets it forking; then it waits forever.
func threadForker() {
	forkFromThreads(2, true, "sleep", "1000")
	os.WriteFile("ready", nil, 0o644)
	forkFromThreads(25, true, "sleep", "1000")
	select {}
}

// probeSubtree runs in its own process (the subreaper setting is
// process-wide): it starts descendants of every kind, then compares the
// subtree read with the descendants the whole table shows, and checks that
// outsider, a process started beside it, is not read.
func probeSubtree(outsider int) error {
	if err := EnableSubreaper(); err != nil {
		return err
	}
	if !subtreeReads() {
		return fmt.Errorf("the subtree is not read as the subreaper")
	}
	self := os.Getpid()
	// Children of four threads; a shell exec'd into sleep whose subshell
	// left a zombie and an orphan re-parented here; a setsid shell with
	// two sleeps.
	mine := map[int]bool{}
	for _, c := range forkFromThreads(1, false, "sleep", "1000") {
		mine[c.Process.Pid] = true
	}
	sh := exec.Command("/bin/sh", "-c", `setsid sh -c 'sleep 1000 & sleep 1000 & wait' & (sleep 1000 &); exec sleep 1000`)
	if err := sh.Start(); err != nil {
		return err
	}
	defer killBelow(self)
	mine[sh.Process.Pid] = true
	// 4 + sleep + setsid sh + 2 sleeps + the orphan, all live.
	const want = forkers + 5
	liveBelow := func(t []procInfo) int {
		n := 0
		for _, p := range descendants(t, self) {
			if !p.dead() && p.state != 'R' {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); liveBelow(snapshot()) != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d live descendants, want %d: %+v", liveBelow(snapshot()), want, descendants(snapshot(), self))
		}
	}
	var sub, whole map[procKey]bool
	for range 50 { // until two reads agree: a shell may still be settling
		sub, whole = keysOf(subtree()), keysOf(descendants(snapshot(), self))
		if fmt.Sprint(sub) == fmt.Sprint(whole) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fmt.Sprint(sub) != fmt.Sprint(whole) {
		return fmt.Errorf("the subtree read %v, the whole table's descendants are %v", sub, whole)
	}
	orphan := false
	for _, p := range subtree() {
		if p.pid == outsider || p.pid == os.Getppid() || p.pid == 1 {
			return fmt.Errorf("the subtree read process %d, which is not below this one", p.pid)
		}
		if p.ppid == self && !mine[p.pid] && !p.dead() {
			orphan = true
		}
	}
	if !keysOf(snapshot())[procKey{outsider, startOf(outsider)}] {
		return fmt.Errorf("the outsider %d is not in the whole table: the check proves nothing", outsider)
	}
	if !orphan {
		return fmt.Errorf("no orphan was re-parented here: the check proves nothing")
	}
	// The per-thread files matter: the children hang off several threads.
	var path procPath
	var buf [4096]byte
	var w walker
	parents := 0
	dir, err := syscall.Open("/proc/self/task", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(dir)
	for _, tid := range w.taskIDs(dir, nil) {
		if n, ok := readOnce(path.of(self, tid, "children"), buf[:]); ok && n > 0 {
			parents++
		}
	}
	if parents < 2 {
		return fmt.Errorf("children hang off %d thread(s), want several", parents)
	}
	for k := range sub {
		fmt.Println("descendant", k.pid, k.start)
	}
	return nil
}

func startOf(pid int) uint64 { t, _ := StartTicks(pid); return t }

func keysOf(ps []procInfo) map[procKey]bool {
	out := make(map[procKey]bool, len(ps))
	for _, p := range ps {
		out[p.key()] = true
	}
	return out
}

// killBelow kills every process below this one and reaps them all (as the
// subreaper, every orphan comes here): nothing outlives the probe.
func killBelow(self int) {
	for _, p := range descendants(snapshot(), self) {
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err == syscall.ECHILD {
			return
		}
	}
}

// TestTheSubtreeReadFindsEveryDescendantAndNothingElse: a process that is
// the subreaper reads its subtree: every descendant (children of several
// threads, a setsid shell's, a zombie, an orphan re-parented to it) and no
// process beside it. Class of input: each way a process comes to be below
// acpflow, and a sibling started by acpflow's parent.
func TestTheSubtreeReadFindsEveryDescendantAndNothingElse(t *testing.T) {
	if !childrenListed() {
		t.Skip("this kernel lists no children (CONFIG_PROC_CHILDREN)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outsider := exec.Command("sleep", "1000")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		outsider.Process.Kill()
		outsider.Wait()
		assertPidGone(t, outsider.Process.Pid)
	}()
	probe := exec.Command(exe, "-test.run=^$")
	probe.Env = append(os.Environ(), helperVar+"=probe "+strconv.Itoa(outsider.Process.Pid))
	probe.Stderr = os.Stderr
	out, err := probe.Output()
	if err != nil {
		t.Errorf("probe: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	n := 0
	for sc.Scan() {
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(sc.Text(), "descendant %d %d", &pid, &start); err == nil {
			n++
			if Alive(pid, start) {
				t.Errorf("the probe's descendant %d is still alive", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if err == nil && n < forkers+5 {
		t.Errorf("the probe reported %d descendants:\n%s", n, out)
	}
}

// needSubreaper skips a test whose orphans must come back to this process
// (PROCGROUP_NO_SUBREAPER=1): without the subreaper they go to init, and
// no teardown is promised to find them (see EnableSubreaper).
func needSubreaper(t *testing.T) {
	t.Helper()
	registry.mu.Lock()
	on := registry.subreaper
	registry.mu.Unlock()
	if !on {
		t.Skip("orphans go to init without the subreaper")
	}
}

// TestTheSuiteReadsWhatItSays: the package's tests run against the source
// they claim to (the subtree as the subreaper, else the whole table), so a
// green run says something of each.
func TestTheSuiteReadsWhatItSays(t *testing.T) {
	want := os.Getenv("PROCGROUP_NO_SUBREAPER") == "" && os.Getenv("PROCGROUP_WHOLE_TABLE") == "" && childrenListed()
	if got := subtreeReads(); got != want {
		t.Errorf("subtree reads: %v, want %v", got, want)
	}
}

// BenchmarkTeardownRead times one read of the process table as a teardown
// makes it (a sweep round's, afresh), beside a child with a realistic
// subtree (the shell, cat, two sleeps and a setsid orphan) and, as in a
// batch at --concurrency 8, batchAgents other live children, each a
// multi-threaded Go process: the whole subtree's walk (the watcher's),
// the walk for the shell's teardown, and the whole table's reads.
func BenchmarkTeardownRead(b *testing.B) {
	c, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", `sleep 1000 & sleep 1000 & (setsid sleep 1000 &); cat >/dev/null`},
		Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Teardown(Ladder{EOFGrace: time.Millisecond, TermGrace: time.Millisecond}) })
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	const batchAgents = 8
	for range batchAgents {
		a, err := Start(Spec{Path: exe, Args: []string{"-test.run=^$"}, Env: []string{helperVar + "=idlethreads"}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { a.Teardown(Ladder{EOFGrace: 10 * time.Second, TermGrace: time.Second}) })
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if p, ok := readProc(a.Pid()); ok && p.threads > agentThreads {
				break
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(subtree()) < 5+batchAgents && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	self, _ := readProc(os.Getpid())
	b.Logf("subtree %d processes (%d threads here), the walk for one child %d, whole table %d",
		len(subtree()), self.threads, len(subtreeOf(c)), len(snapshot()))
	b.Run("subtree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			subtree()
		}
	})
	b.Run("child", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			subtreeOf(c)
		}
	})
	b.Run("whole-table", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snapshot()
		}
	})
	b.Run("whole-table-incremental", func(b *testing.B) {
		var tbl procTable
		old := wholeTable.Swap(true)
		defer wholeTable.Store(old)
		b.ReportAllocs()
		for b.Loop() {
			tbl.read()
		}
	})
}
