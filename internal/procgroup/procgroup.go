// Package procgroup starts a child process in a process group of its own and
// tears it down so that nothing it started outlives it.
//
// The teardown ladder is the seed's (close stdin, wait, SIGTERM the group,
// wait, SIGKILL the group, wait), closed where the seed leaked: a descendant
// that called setsid left the group and survived. Here every descendant ever
// seen below the child is remembered (pid and start time), and once the
// group is gone whatever is left of the child's tree is frozen (SIGSTOP)
// round by round until nothing new appears, then killed (Child.killStrays),
// so that a fork at that very moment cannot escape; with EnableSubreaper,
// orphans of the child's tree are re-parented to acpflow instead of init, so
// they stay visible and are reaped. Every
// child's environment carries a marker (MarkerVar) that its descendants
// inherit, so an orphan no scan saw is killed with the child it came from,
// and a later acpflow can prove which processes a dead one started
// (Leftovers.Reap).
//
// # Notes
//
// The registry of live children and the subreaper flag are process-wide,
// because the process table and PR_SET_CHILD_SUBREAPER are.
//
// On macOS the child gets a group of its own and the same ladder, and
// every descendant seen below it while it lived is killed with it, but
// there is no subreaper and no Pdeathsig: a process that leaves the group
// (setsid) and is orphaned before a read of the process table sees it is
// re-parented to launchd and not followed, and a child outlives an
// acpflow that is killed outright (a later acpflow reaps what the run
// store recorded). The process table is read with sysctl (kern.proc)
// instead of /proc (*_linux.go, *_darwin.go).
package procgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// StderrLimit is how much of a child's stderr is kept (docs/acp-subagent.md#stderr-and-the-terminal: at least 64 KiB).
const StderrLimit = 64 << 10

// pollEvery is how often teardown checks whether the group is gone. The
// seed polls every 15 ms; a shorter poll makes a cooperative exit cost less.
const pollEvery = 2 * time.Millisecond

// Spec says what to start. Path must already be resolved: a missing
// command is the caller's error to word, with the name the user wrote.
type Spec struct {
	Path string
	Args []string // argv[1:]
	Env  []string // the complete environment; nil means empty, never inherited; MarkerVar is added
	Dir  string
	// OnDescendant, if set, is called once for each process seen below the
	// child (setsid ones and marked orphans included) with the child's pid,
	// in the order seen and never after Teardown has returned: the run store
	// records them, so that a later acpflow can kill them if this one is
	// killed. It must not call back into the Child.
	OnDescendant func(child int, p Proc)

	// Cloneflags, UidMappings, GidMappings and AmbientCaps start the child
	// in new namespaces with the capabilities it needs there: the
	// launcher of internal/sandbox sets up its own user, PID and mount
	// namespaces, and sandbox.Command says what to set. Zero values start
	// it in acpflow's. The process group and Pdeathsig stay
	// procgroup's, so teardown is the same for a sandboxed child: its
	// launcher is the group leader, and a launcher that dies ends its PID
	// namespace, and with it every process the agent started. They are
	// Linux's: elsewhere Start refuses a Spec that sets them.
	Cloneflags  uintptr
	UidMappings []IDMap
	GidMappings []IDMap
	AmbientCaps []uintptr

	// ExtraFiles are the child's descriptors from 3 on, as exec.Cmd's:
	// the sandbox launcher reads its request from one.
	ExtraFiles []*os.File
}

// Proc names one process for its whole life: a pid and its start time, in
// clock ticks since boot. PGID is its process group when it was seen.
type Proc struct {
	PID, PGID  int
	StartTicks uint64
}

// Child is a started process group.
type Child struct {
	cmd    *exec.Cmd
	pid    int
	start  uint64
	stdin  *os.File
	stdout *os.File
	stderr *Tail

	exited     chan struct{} // closed once the leader is reaped
	exitErr    error
	stderrDone chan struct{}

	marker string // the value of MarkerVar in its environment

	mu   sync.Mutex
	seen map[procKey]procInfo // every descendant seen while the child lived

	// hookMu orders the OnDescendant calls and closes them at teardown's end.
	hookMu       sync.Mutex
	onDescendant func(int, Proc)
	hooksClosed  bool

	teardownOnce sync.Once
	report       Report
	killed       atomic.Bool // Kill was called
}

// Report says how a teardown ended.
type Report struct {
	// Tier is the step of the ladder that ended the group: "exited" (it had
	// already gone), "eof", "term" or "kill". A group ended by Kill (the
	// second interrupt) reports "kill", whatever step the ladder was on.
	Tier     string
	Duration time.Duration
	// Exit is how the child itself ended, as os/exec words it
	// ("exit status 0", "signal: terminated").
	Exit string
	// Escaped counts the processes of the child's that were left once its
	// group was gone (setsid, double forks, orphans) and had to be killed.
	Escaped int
	// Descendants counts the processes seen below the child (OnDescendant's calls).
	Descendants int
	Err         error // the group could not be confirmed gone
}

// Ladder is how a child is torn down: close stdin, wait up to EOFGrace for
// the group to exit, SIGTERM it, wait up to TermGrace, SIGKILL it.
type Ladder struct {
	EOFGrace  time.Duration
	TermGrace time.Duration
	// EOFIdle ends the EOF wait early once the group has been idle this
	// long: no member running, in disk sleep, or using CPU. Only for a
	// child known never to exit on EOF: one that exits after waiting idle
	// (a network write, a timer) looks the same, and would be cut short.
	// 0 waits the whole EOFGrace, as the seed does.
	EOFIdle time.Duration
	// EOFDoneAt ends the EOF wait early once the group is down to this
	// many live members and they used no CPU over one look: for a child
	// known to exit on EOF only after a timer of its own once the
	// processes it started are gone (codex-acp waits out a 2 s timer for
	// an app-server that exited long before). 1 is the leader alone; 2
	// the leader and the one process it runs (a sandbox launcher and its
	// agent). The processes it started get the whole EOFGrace; only the
	// timer is cut short. 0 is off.
	EOFDoneAt int
}

// Start starts spec in a new process group with its stdin and stdout piped
// to the caller and its stderr kept in a Tail.
func Start(spec Spec) (*Child, error) {
	attr, err := sysProcAttr(spec)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	marker := newMarker()
	env := markedEnv(spec.Env, marker)
	cmd := &exec.Cmd{
		Path:        spec.Path,
		Args:        append([]string{spec.Path}, spec.Args...),
		Env:         env,
		Dir:         spec.Dir,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  spec.ExtraFiles,
		SysProcAttr: attr,
	}
	spawned := registry.begin()
	defer spawned()
	startErr := cmd.Start()
	// The child has its own copies now (or failed to start).
	inR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, startErr
	}
	c := &Child{
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     NewTail(StderrLimit),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		seen:       make(map[procKey]procInfo),
		marker:     marker,

		onDescendant: spec.OnDescendant,
	}
	if p, ok := readProc(c.pid); ok {
		c.start = p.start
	}
	go func() {
		c.exitErr = cmd.Wait()
		close(c.exited)
	}()
	go c.drainStderr(errR)
	registry.add(c)
	return c, nil
}

// drainStderr keeps the child's stderr in its Tail until every writer has
// closed it (the child and any descendant that inherited it), then closes
// stderrDone: reading it always, never only on demand, keeps a chatty
// child from blocking on a full pipe.
func (c *Child) drainStderr(errR *os.File) {
	defer close(c.stderrDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := errR.Read(buf)
		c.stderr.Write(buf[:n])
		if err != nil {
			errR.Close()
			return
		}
	}
}

// Pid is the child's pid, which is also its process group id.
func (c *Child) Pid() int { return c.pid }

// Stdin is the write end of the child's stdin.
func (c *Child) Stdin() *os.File { return c.stdin }

// Stdout is the read end of the child's stdout.
func (c *Child) Stdout() *os.File { return c.stdout }

// Stderr is what the child (and its group) wrote to stderr, the last
// StderrLimit bytes of it.
func (c *Child) Stderr() *Tail { return c.stderr }

// Exited is closed once the child itself has exited and been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// StderrClosed is closed once the child's stderr reached its end (every
// writer in the group exited or closed it).
func (c *Child) StderrClosed() <-chan struct{} { return c.stderrDone }

// ExitErr is the child's exit status; valid after Exited is closed.
func (c *Child) ExitErr() error { return c.exitErr }

// Teardown runs the ladder once; later and concurrent calls wait for the
// first and return its report. It always leaves the group, every descendant
// seen, and the child's pipes closed.
func (c *Child) Teardown(l Ladder) Report {
	c.teardownOnce.Do(func() { c.report = c.teardown(l) })
	return c.report
}

// Kill skips the graces: SIGKILL to the group now. Teardown still has to
// run to reap and close; it then finds the group gone.
func (c *Child) Kill() {
	c.killed.Store(true)
	syscall.Kill(-c.pid, syscall.SIGKILL)
}

func (c *Child) teardown(l Ladder) Report {
	begin := time.Now()
	// This read of the process table finds the descendants born since the
	// watcher's last look, and the orphans already re-parented to acpflow.
	// Whatever the group leaves behind when it dies was seen here as its
	// descendant, or carries its marker.
	procs := table.read()
	c.observe(procs, registry.orphanMarks(procs))
	r := Report{Tier: "exited"}
	if !c.waitGone(0) {
		r.Tier = "eof"
		c.stdin.Close()
		if !c.waitEOF(l, procs) {
			r.Tier = "term"
			syscall.Kill(-c.pid, syscall.SIGTERM)
			for _, p := range c.escaped() {
				if alive(p.key()) {
					syscall.Kill(p.pid, syscall.SIGTERM)
				}
			}
			if !c.waitGone(l.TermGrace) {
				r.Tier = "kill"
				syscall.Kill(-c.pid, syscall.SIGKILL)
				if !c.waitGone(10 * time.Second) {
					r.Err = fmt.Errorf("process group %d still has live members after SIGKILL", c.pid)
				}
			}
		}
	}
	c.stdin.Close()
	// What left the group (setsid, double forks), or was started while
	// the ladder ran, is found, frozen and killed: see killStrays. c stays
	// registered meanwhile, so its own leader is never taken for an orphan
	// (and its exit status stays exec.Cmd's).
	r.Escaped = c.killStrays()
	registry.remove(c)
	r.Descendants = c.closeHooks()
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		if r.Err == nil {
			r.Err = errors.New("child was not reaped")
		}
	}
	if c.killed.Load() && r.Tier != "exited" {
		r.Tier = "kill"
	}
	r.Exit = exitWords(c.exitErr)
	c.awaitDrained()
	c.stdout.Close()
	select {
	case <-c.stderrDone:
	case <-time.After(time.Second):
		// An escaped writer we could not kill holds stderr open; stop waiting.
	}
	r.Duration = time.Since(begin)
	return r
}

// observe adds to what the child has been seen to start: its current
// descendants, the members of its group (an orphan of a shell that just
// exited is in it, and may be in the middle of execve, its marker
// unreadable, then killed with the group before another look), and the
// orphans that carry its marker (marks: orphan pid → marker) with their
// own descendants.
func (c *Child) observe(table []procInfo, marks map[int]string) {
	ds := descendants(table, c.pid)
	for _, p := range table {
		if p.pgid == c.pid && p.pid != c.pid && !p.dead() {
			ds = append(ds, p)
		}
		if marks[p.pid] == c.marker {
			ds = append(ds, p)
			ds = append(ds, descendants(table, p.pid)...)
		}
	}
	c.remember(ds)
}

// remember adds processes to what the child has been seen to start, and
// reports the new ones to OnDescendant.
func (c *Child) remember(ds []procInfo) {
	if len(ds) == 0 {
		return
	}
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	var fresh []procInfo
	c.mu.Lock()
	for _, p := range ds {
		if _, ok := c.seen[p.key()]; !ok {
			c.seen[p.key()] = p
			fresh = append(fresh, p)
		}
	}
	c.mu.Unlock()
	if c.onDescendant == nil || c.hooksClosed {
		return
	}
	for _, p := range fresh {
		c.onDescendant(c.pid, Proc{PID: p.pid, PGID: p.pgid, StartTicks: p.start})
	}
}

// Watch sets what is called for each process seen below the child from
// now on, in place of Spec.OnDescendant: for a child started before it
// was known whose it would be (a sandbox launcher started ahead), and
// which has started nothing yet.
func (c *Child) Watch(onDescendant func(child int, p Proc)) {
	c.hookMu.Lock()
	c.onDescendant = onDescendant
	c.hookMu.Unlock()
}

// closeHooks ends the OnDescendant calls and says how many processes were
// seen below the child.
func (c *Child) closeHooks() int {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	c.hooksClosed = true
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// escaped returns the descendants seen that are not in the child's group.
func (c *Child) escaped() []procInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []procInfo
	for _, p := range c.seen {
		if p.pgid != c.pid {
			out = append(out, p)
		}
	}
	return out
}

// groupGone reports whether no member of the group is left but zombies,
// reaping the zombies acpflow adopted as a subreaper. While the leader
// lives the group is not gone, and once it is reaped kill(-pgid, 0) says
// whether anyone is left; only then is the process table read, to tell
// live members from zombies, at most every observeEvery.
func (c *Child) groupGone(lastScan *time.Time) bool {
	select {
	case <-c.exited:
	default:
		return false
	}
	if err := syscall.Kill(-c.pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if time.Since(*lastScan) < observeEvery {
		return false
	}
	*lastScan = time.Now()
	table := freshFor(c)
	if !hasMember(table, c.pid) && subtreeReads() {
		// A member lives outside c's part of the subtree: a process of
		// another child's that joined the group (setpgid). Read it all.
		table = fresh()
	}
	gone := true
	self := os.Getpid()
	for _, p := range table {
		if p.pgid != c.pid {
			continue
		}
		if !p.dead() {
			gone = false
		} else if p.ppid == self && p.pid != c.pid {
			reap(p.pid)
		}
	}
	return gone
}

// hasMember reports whether procs has a member of group pgid.
func hasMember(procs []procInfo, pgid int) bool {
	for _, p := range procs {
		if p.pgid == pgid {
			return true
		}
	}
	return false
}

// waitEOF waits, after stdin closed, until the group is gone (true), the
// EOF grace has passed, or the ladder's early end came (false): see
// Ladder.EOFIdle and Ladder.EOFDoneAt.
func (c *Child) waitEOF(l Ladder, procs []procInfo) bool {
	if l.EOFDoneAt > 0 {
		return c.waitDownTo(l.EOFGrace, l.EOFDoneAt)
	}
	return c.waitIdle(l.EOFGrace, l.EOFIdle, procs)
}

// doneLook is how often waitDownTo looks at the group: two looks at the
// last members with no CPU used between them end the wait.
const doneLook = 20 * time.Millisecond

// waitDownTo waits until the group is gone (true), d has passed, or the
// group is down to n live members (one in the middle of its exit still
// counts) with the leader among them, and they have used no CPU over one
// look (false).
func (c *Child) waitDownTo(d time.Duration, n int) bool {
	deadline := time.Now().Add(d)
	var last *cpuUse
	for {
		if c.waitGone(max(min(doneLook, time.Until(deadline)), 0)) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		pids := c.liveMembers(freshFor(c))
		if len(pids) > n || !slices.Contains(pids, c.pid) {
			last = nil
			continue
		}
		u := cpuOf(pids)
		if last != nil && u.ticks == last.ticks && !u.running && !slices.ContainsFunc(pids, threadRunning) {
			return false
		}
		last = &u
	}
}

// liveMembers lists the group's live members in procs.
func (c *Child) liveMembers(procs []procInfo) []int {
	var pids []int
	for _, p := range procs {
		if p.pgid == c.pid && !p.dead() {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// waitIdle waits, after stdin closed, until the group is gone (true), d has
// passed, or the group has been idle for idle (false): see Ladder.EOFIdle.
// procs is the process table as teardown read it, the group's first
// look: an agent that exits at EOF costs no other read of the table.
func (c *Child) waitIdle(d, idle time.Duration, procs []procInfo) bool {
	if idle <= 0 || idle >= d {
		return c.waitGone(d)
	}
	deadline := time.Now().Add(d)
	busy := c.groupCPU(procs)
	quietSince := time.Now()
	for {
		step := min(idle/2, time.Until(deadline))
		if c.waitGone(max(step, 0)) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		cpu := c.groupCPU(table.read())
		if cpu.ticks != busy.ticks || cpu.members != busy.members || cpu.running {
			quietSince = time.Now()
		}
		busy = cpu
		if time.Since(quietSince) >= idle {
			return false
		}
	}
}

// groupCPU finds the group's members in procs, a read of the process
// table (every process there now, a new one read afresh), so a member the
// descendant watcher has not seen yet (a pipeline's cat that is flushing
// its EOF right now) counts: it sums their CPU time and says whether any
// is running or in disk sleep, both read afresh, and fingerprints who
// they are, since a member exiting or starting is activity too.
func (c *Child) groupCPU(procs []procInfo) cpuUse {
	var pids []int
	var members uint64
	for _, p := range procs {
		if p.pgid != c.pid {
			continue
		}
		pids = append(pids, p.pid)
		members += uint64(p.pid)*0x9e3779b97f4a7c15 ^ p.start
	}
	u := cpuOf(pids)
	u.members = members
	return u
}

// exitWords says how a process ended, from exec.Cmd.Wait's error.
func exitWords(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// waitGone polls until the group is gone or d has passed.
func (c *Child) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	var lastScan time.Time
	for {
		if c.groupGone(&lastScan) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-c.exited:
			// The leader is reaped: check at once, then poll the rest.
		case <-time.After(min(pollEvery, left)):
		}
	}
}

// waitKeysGone waits (bounded) for the processes to die and reaps those
// that were re-parented to acpflow.
func waitKeysGone(keys []procKey) {
	self := os.Getpid()
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range keys {
		for {
			p, ok := readProc(k.pid)
			if !ok || p.start != k.start {
				break
			}
			if p.dead() {
				if p.ppid == self && !registry.isLeader(k.pid) {
					reap(k.pid)
					continue
				}
				// Its parent reaps it, or dies and it comes to us (or
				// init): poll until it is gone or ours.
			}
			if time.Now().After(deadline) {
				return
			}
			time.Sleep(pollEvery)
		}
	}
}

// reap collects the exit status of a zombie that acpflow adopted. It is
// only called for pids that are not acpflow's own exec'd children, whose
// status belongs to their exec.Cmd.
func reap(pid int) {
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
}
