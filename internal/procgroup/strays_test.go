//go:build linux

package procgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/testagent/record"
)

// assertNoneMarked fails t for every live process that carries marker:
// whatever a child started, recorded or not, is gone only when none does.
func assertNoneMarked(t *testing.T, marker string) {
	t.Helper()
	for _, pid := range record.Marked(map[string]bool{marker: true}) {
		t.Errorf("process %d, started by the child (it carries its marker), is still alive", pid)
		syscall.Kill(pid, syscall.SIGKILL) // leave nothing behind, even failing
	}
}

// TestTeardownKillsWhatIsStartedAsTheChildExits: the child spawns, at the
// moment its stdin closes, descendants that leave its group, and exits a
// few milliseconds later (a different delay each time), so the teardown
// meets them at every stage of their start and while they fork.
//
// Class of input: every timing between a child's exit and the teardown's
// sweep, for each way of leaving the group: setsid, a double fork, a
// storm of setsid processes, a chain of daemons that each start the next
// and exit (so the pid keeps changing), and a shell that forks without
// exec in a loop while the sweep runs, a program that forks setsid
// processes from several threads at once (agents in Go, Rust or node do;
// each child's parent is the thread that forked it), subshells that
// background a process and exit (an orphan re-parented to acpflow), and a
// setsid parent that dies 30 ms in, as the sweep meets its children;
// alone, and beside another live child (where only the marker says whose
// an orphan is). None of them, and none of what they forked, is alive
// after the teardown. As the subreaper the suite reads acpflow's subtree
// (TestMain), so each round of the sweep here is a subtree walk.
func TestTeardownKillsWhatIsStartedAsTheChildExits(t *testing.T) {
	needSubreaper(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Each link starts the next in a session of its own and exits; $0 is
	// the script itself.
	chain := `[ "$1" -gt 0 ] && { setsid sh -c "$0" "$0" "$(($1-1))" & exit 0; }; exec sleep 1000`
	for _, tc := range []struct{ name, script string }{
		{"setsid", `setsid sleep 1000 &`},
		{"double fork", `(setsid sh -c 'sleep 1000 & sleep 1000 & wait' &)`},
		{"storm", `for i in 1 2 3 4 5 6 7 8 9 10 11 12; do setsid sleep 1000 & done`},
		{"re-forking daemon", `setsid sh -c '` + chain + `' '` + chain + `' 100 &`},
		{"forking loop", `setsid sh -c 'i=0; while [ $i -lt 200 ]; do (sleep 1000) & i=$((i+1)); done; wait' &`},
		{"forks from threads", `setsid env ` + helperVar + `=threadforker '` + exe + `' -test.run='^$' &
while [ ! -e ready ]; do sleep 0.01; done`},
		{"subshell background", `( setsid sleep 1000 & ) & ( (setsid sleep 1000 &) & ) &`},
		{"parent dies mid-sweep", `setsid sh -c 'sleep 1000 & (setsid sleep 1000 &); sleep 1000 & sleep 0.03; exit 0' &`},
	} {
		for _, beside := range []bool{false, true} {
			name := tc.name + "/alone"
			if beside {
				name = tc.name + "/beside another child"
			}
			t.Run(name, func(t *testing.T) {
				var other *Child
				if beside {
					other = startShell(t, t.TempDir(), `cat >/dev/null`)
				}
				for i := 0; i < 20 && !t.Failed(); i++ {
					// The child exits 0 to 57 ms after starting them:
					// the sweep meets them starting, forking, moving.
					delay := fmt.Sprintf("0.%03d", i*3)
					c := startShell(t, t.TempDir(), "cat >/dev/null\n"+tc.script+"\nsleep "+delay+"\nexit 0")
					c.Teardown(Ladder{EOFGrace: 5 * time.Second, TermGrace: time.Second})
					assertGroupGone(t, c.Pid())
					assertNoneMarked(t, c.Marker())
				}
				if other != nil {
					select {
					case <-other.Exited():
						t.Error("the other child was killed")
					default:
					}
				}
			})
		}
	}
}

// TestTheProcessTableSeesAnOrphanReparented: the table remembers what it
// read of a process; once the process's parent dies it is re-parented
// (here to this process, the subreaper), and a read must say so, or the
// orphan would stay below a parent that no longer exists, neither a
// descendant nor an orphan. Class of input: a process read while its
// parent lived, read again after.
func TestTheProcessTableSeesAnOrphanReparented(t *testing.T) {
	needSubreaper(t)
	dir := t.TempDir()
	c := startShell(t, dir, `sh -c 'sleep 1000 & echo $! > gc.txt; echo $$ > mid.txt; exec cat >/dev/null'`)
	gc, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "gc.txt")))
	mid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "mid.txt")))
	var tbl procTable
	ppidOf := func() int {
		for _, p := range tbl.read() {
			if p.pid == gc {
				return p.ppid
			}
		}
		return 0
	}
	if got := ppidOf(); got != mid {
		t.Fatalf("parent of %d = %d, want %d", gc, got, mid)
	}
	syscall.Kill(mid, syscall.SIGKILL)
	// A hang guard, not a measurement: the kernel reparents at once, but a
	// loaded machine may take seconds to let this loop see it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if got := ppidOf(); got == os.Getpid() {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("parent of %d = %d after its parent died, want this process %d", gc, got, os.Getpid())
		}
	}
	c.Teardown(Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	assertPidGone(t, gc)
}

// TestAZombieWithLiveThreadsIsNotDead: a process whose main thread has
// exited while other threads run shows as a zombie in /proc/PID/stat; it
// still runs, forks and keeps its children. Class of input: the thread
// count of a zombie, one (dead) or more (alive).
func TestAZombieWithLiveThreadsIsNotDead(t *testing.T) {
	stat := func(state string, threads int) []byte {
		return []byte("42 (x) " + state + " 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 " + strconv.Itoa(threads) + " 0 12345 0 0")
	}
	for _, tc := range []struct {
		state   string
		threads int
		dead    bool
	}{{"Z", 1, true}, {"Z", 3, false}, {"S", 1, false}, {"X", 1, true}, {"T", 2, false}} {
		p, ok := parseStat(42, stat(tc.state, tc.threads))
		if !ok || p.threads != tc.threads || p.dead() != tc.dead {
			t.Errorf("%s with %d threads: %+v, dead %v; want dead %v", tc.state, tc.threads, p, p.dead(), tc.dead)
		}
	}
}
