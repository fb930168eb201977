package procgroup

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The subtree read: what a teardown's fresh reads of the process table
// (each round of the sweep, the group check) are when acpflow is the child
// subreaper. A fresh read of the whole table costs a stat read per process
// on the machine (its share of a one-step run's CPU grew with the
// machine's process count); acpflow's own subtree is the handful of
// processes its agents started. The reads repeated while a child lives
// (the watcher, a teardown's first look and idle checks) stay incremental
// reads of the whole table (procTable), which cost less than a walk.
//
// # Notes
//
// Why the subtree is the whole table, for a teardown. With
// PR_SET_CHILD_SUBREAPER set before the first child started, every
// process acpflow ever started, and everything those started, stays below
// acpflow until it dies: an orphan is re-parented to the nearest living
// subreaper above it (acpflow, or one below it: an agent's own, a
// sandbox's PID-namespace init), never to init. So every process a
// teardown looks for is there: the child's descendants, its group's
// members (a process joins a group by fork, or by setpgid within
// acpflow's session, which no process outside the subtree has a reason
// to do, and the group's kill reaches it anyway), the processes seen
// below the child while it lived, and the orphans re-parented to acpflow.
// What is outside (acpflow's parent, siblings, other users' processes,
// another acpflow's agents) is never the child's, and is no longer read.
//
// How it is walked. A child's parent is the thread that forked it, and
// /proc/PID/task/TID/children lists one thread's children, so every
// thread's file is read: Go's runtime forks from whichever thread the
// goroutine runs on, agents in Go, Rust or node fork from many, and an
// orphan is re-parented to the first live thread of its reaper, which is
// not the leader once that has exited. A process with
// one thread has one file (its task id is its pid), read without listing
// /proc/PID/task. Each file is read with one read() of a page: the kernel
// fills it following each child to its next sibling, and restarts by
// position (skipping one child for each that left the list) only when
// the child it stands on has left; each later read() restarts by
// position. That is the caveat of the kernel's documentation (the file is
// exact only for a stopped parent): a child is skipped only when one
// listed before it left the list during the read, reaped (then it is gone
// when visited) or re-parented because the list's process died (then it
// is read dead), and a walk that meets either is made again (below); a
// list longer than a page (some 500 children of one thread) is not
// trusted, and that read is the whole table's instead. Each process
// found is read from /proc/PID/stat after its own lists, so its parent,
// group, state and start time are as fresh as the whole table's; a pid
// met twice (re-parented during the walk) is kept once.
//
// A death during the walk. A process's children are moved to their
// reaper (acpflow, a subreaper below it, another of its own threads) as
// it becomes a zombie, so a walk can miss a process whose parent died
// while it ran: listed by neither, if the reaper's list was read before
// the move and the parent's after. Each process's lists are read before
// its stat: read alive, it had moved no child when they were read. A walk
// that reads a process dead that the last walk had not met dead (so it
// may have died during this one), or lists one that is gone when read,
// is made again; a zombie met by the last walk died before this one
// began, and its children are at their reaper's. After three such walks
// in a row the whole table is read instead.
//
// Why the sweep stays correct (killStrays). What a settled walk can
// still miss is what the whole table's listing misses: a process forked
// after its parent's list was read, by a parent that was running then (a
// stray found now, so not the last round; a stopped one forks nothing),
// or moved to another thread's list by a thread's exit in a running
// process (the same). So a round that finds nothing new and no new zombie
// saw everything, as before: SIGSTOP before SIGKILL is unchanged, and a
// stopped process's lists are exact, since it neither forks nor reaps.
//
// A teardown's walk (subtreeOf). A teardown's walks (each round of the
// sweep, groupGone's read) cover only what that child's sweep can take, since in a batch every walk of the
// whole subtree also read every other agent's (a multi-threaded one is a
// task directory and a children file per thread) and acpflow's threads.
// A teardown of c walks c's subtree from c's leader (whichever thread of
// acpflow forked it), and acpflow's other children with their subtrees,
// but for the other live children's leaders, read and not walked. Nothing
// c's sweep takes is below them: c takes the processes it saw below c
// while it lived, its group's members, and acpflow's orphans (those that
// carry its marker, or all when it is the only live child), with what is
// below those. A process below c stays below c or, orphaned, goes to its
// nearest living subreaper ancestor: one below c (still c's subtree) or
// acpflow; never into another agent's subtree, which is no ancestor of
// it. So what c saw is in c's subtree or an orphan of acpflow's, and so
// is every orphan of acpflow's, marked or not. A group member can sit
// below another agent only by setpgid into c's group from there (c's
// group is in acpflow's session, so the other agent may): the group's
// kill reaches it all the same, and groupGone, told by kill(-pgid, 0)
// that a member is left where its walk found none, reads the whole
// subtree. Its own agent's teardown kills it in any case. When the other
// agent is torn down, its sweep has stopped and killed all of its own
// before it is unregistered; until then, an orphan of its re-parented to
// acpflow is read (it is acpflow's child) and not taken, not carrying
// c's marker.
//
// acpflow's level. The kernel re-parents an orphan to the first thread
// of its reaper's group that is not exiting (kernel/exit.c,
// find_new_reaper and find_alive_thread, since Linux 3.19): the group's
// leader, in list order, while it lives, and acpflow's is Go's main
// thread (m0), which never exits (the runtime parks it rather than end
// it). So every orphan of acpflow's is on its leader thread's children
// file, and a teardown's walk reads that one file of acpflow's, not one
// per thread (acpflow has 10 to 20 in a batch): acpflow's other children,
// on other threads, are the live children (c's leader is walked as the
// root; the others are not walked), a spawn under way (not registered
// yet, and no sweep takes or reaps anything then: registry.starting) and
// RunOwn's helpers (never taken). On an older kernel (leaderReaps) every
// thread's file is read. An agent's own threads are all read: agents fork
// from any thread, and their orphans go to the agent's first live thread.
//
// Walks of different scopes. A zombie met dead by an earlier walk, of any
// scope, died before this walk began (walks are serialized), so its
// children were at their reaper's when this walk read that reaper's list:
// in scope, for a walk that has the zombie in scope (the reaper is its
// ancestor, above it but below acpflow or acpflow's leader thread). Each
// scope keeps what its own last walk met dead, and a zombie counts as
// old if any scope's memory has it; a scope's memory is forgotten with
// its child. A walk that reads a zombie no walk has met is made again, as
// before.
//
// The incremental read stays for the repeated reads (procTable): it costs
// a directory listing plus the processes born since the last, where a
// walk reads a children file per thread of every process in it; the
// subtree is read whole every time (a stat each, the processes are few,
// and a fresh read needs no rule for re-parented processes).
//
// When it is not used: acpflow is not the subreaper (EnableSubreaper not
// called, it failed, or a child had started before it: orphaned then,
// they went to init), or the kernel has no children files
// (CONFIG_PROC_CHILDREN, checked once). The whole table is read then,
// as before.

// wholeTable makes every read the whole table's, even as the subreaper:
// the tests run the package's suite both ways with it.
var wholeTable atomic.Bool

// childrenListed reports whether the kernel lists a thread's children
// (CONFIG_PROC_CHILDREN), once.
var childrenListed = sync.OnceValue(func() bool {
	var path procPath
	pid := os.Getpid()
	fd, ok := openPath(path.of(pid, pid, "children"))
	if ok {
		syscall.Close(fd)
	}
	return ok
})

// subtreeReads reports whether the process table is read as acpflow's
// subtree (see above).
func subtreeReads() bool {
	registry.mu.Lock()
	on := registry.subtree
	registry.mu.Unlock()
	return on && !wholeTable.Load() && childrenListed()
}

// fresh reads the process table afresh, as a round of the sweep needs:
// acpflow's subtree when it can be, else the whole table.
func fresh() []procInfo {
	if subtreeReads() {
		return subtree()
	}
	return snapshot()
}

// freshFor is fresh for a teardown of c: as the subreaper, the part of
// acpflow's subtree c's sweep can need (see "A teardown's walk" above).
func freshFor(c *Child) []procInfo {
	if subtreeReads() {
		return subtreeOf(c)
	}
	return snapshot()
}

// walks serializes subtree reads and remembers, for each scope (nil: the
// whole subtree; a child: its teardown's), what that scope's last walk met
// dead.
var walks struct {
	mu   sync.Mutex
	dead map[*Child]map[procKey]bool
}

// metDead reports whether a walk of any scope met k dead: one did, and
// finished before this one began (walks are serialized), so k died before
// this walk began. Called with walks.mu held.
func metDead(k procKey) bool {
	for _, dead := range walks.dead {
		if dead[k] {
			return true
		}
	}
	return false
}

// walkTries bounds the walks of one subtree read (see subtree).
const walkTries = 3

// subtree reads every process below this one (not itself), parents
// before their children.
func subtree() []procInfo { return subtreeOf(nil) }

// subtreeOf reads what a teardown of c can need of the processes below
// this one (all of them for nil): c's subtree, and acpflow's other
// children with theirs but for the other live children's leaders, whose
// subtrees are not walked (see above). A walk in which a process died
// (one read dead that no walk had met dead, or one listed and gone) may
// have missed its children, on their way to their reaper: the walk is
// made again, and after walkTries such walks, or should a thread have too
// many children to list in one pass, the whole table is read instead.
func subtreeOf(c *Child) []procInfo {
	var others map[int]uint64
	if c != nil {
		others = registry.leadersBut(c)
	}
	walks.mu.Lock()
	defer walks.mu.Unlock()
	if walks.dead == nil {
		walks.dead = make(map[*Child]map[procKey]bool)
	}
	if _, ok := walks.dead[c]; !ok && c != nil {
		// A new scope: forget those of children torn down since.
		for k := range walks.dead {
			if k != nil && !registry.isLive(k) {
				delete(walks.dead, k)
			}
		}
	}
	var w walker
	w.child, w.others = c, others
	for range walkTries {
		w.reset()
		w.walk()
		dead := make(map[procKey]bool, len(w.dead))
		moved := w.inexact || w.vanished
		for _, k := range w.dead {
			dead[k] = true
			moved = moved || !metDead(k)
		}
		walks.dead[c] = dead
		if w.inexact {
			break
		}
		if !moved {
			return w.out
		}
	}
	return snapshot()
}

// leaderReaps says whether an orphan re-parented to acpflow is listed by
// acpflow's leader thread alone: the kernel hands it to the first thread
// of the reaper's group that is not exiting (find_alive_thread, since
// Linux 3.19; before, to the thread that forked the line it came down),
// and the leader, Go's main thread, never exits.
var leaderReaps = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var major, minor int
	var n *int = &major
	for _, c := range u.Release {
		switch {
		case c >= '0' && c <= '9':
			*n = *n*10 + int(c-'0')
		case c == '.' && n == &major:
			n = &minor
		default:
			return major > 3 || major == 3 && minor >= 19
		}
	}
	return major > 3 || major == 3 && minor >= 19
})

// walker holds the buffers and findings of a subtree walk.
type walker struct {
	path  procPath
	buf   [4096]byte
	stat  [512]byte
	tids  []int
	queue []int // every pid listed so far; visited in order
	out   []procInfo
	dead  []procKey // processes read dead
	// vanished says a process listed was gone when read; inexact that a
	// children file took more than one read().
	vanished, inexact bool
	// child is the teardown's child the walk is for (nil: the whole
	// subtree); others the other live children's leaders, pid → start
	// time, whose subtrees it does not walk.
	child  *Child
	others map[int]uint64
}

func (w *walker) reset() {
	w.queue, w.out, w.dead = w.queue[:0], w.out[:0], w.dead[:0]
	w.vanished, w.inexact = false, false
}

// walk lists acpflow's threads' children, then visits every process
// listed, which lists its own. A walk for a child visits the child first
// (whichever thread of acpflow forked it), then lists the children of
// acpflow's leader thread alone, where every orphan comes (leaderReaps),
// and does not visit the other live children's leaders.
func (w *walker) walk() {
	self := os.Getpid()
	if w.child == nil {
		w.threadsBelow(self, -1) // acpflow is multi-threaded: list its tasks
		for i := 0; i < len(w.queue); i++ {
			w.visit(w.queue[i])
		}
		return
	}
	next := w.visitRoot(w.child)
	if leaderReaps() {
		if fd, ok := openPath(w.path.of(self, self, "children")); ok {
			w.listChildren(fd)
		}
	} else {
		w.threadsBelow(self, -1)
	}
	top := len(w.queue) // acpflow's children end here
	for i := next; i < len(w.queue); i++ {
		pid := w.queue[i]
		if start, ok := w.others[pid]; ok && i < top {
			// Another live child's leader: read, not walked.
			if p, ok := readProcInto(pid, w.stat[:]); ok && p.start == start {
				w.found(p)
				continue
			}
		}
		w.visit(pid)
	}
}

// visitRoot visits c's leader, if it is still c's, and says where the
// walk goes on in the queue. Its having been reaped is no death during
// the walk: what it left was moved to acpflow's leader thread before
// that thread's list, read next, is read.
func (w *walker) visitRoot(c *Child) int {
	w.queue = append(w.queue, c.pid)
	fd, ok := openPath(w.path.of(c.pid, c.pid, "children"))
	if !ok {
		w.queue = w.queue[:0]
		return 0
	}
	w.listChildren(fd)
	p, ok := w.readStat(c.pid)
	if !ok || c.start != 0 && p.start != c.start {
		// Reaped, and the pid is another process's now: its children
		// are not c's.
		w.queue = w.queue[:0]
		return 0
	}
	w.found(p)
	return 1
}

// visit reads the children of process pid, then its stat: read alive
// after its lists, it had not passed any child to a reaper when they were
// read (a process's children are re-parented as it becomes a zombie).
func (w *walker) visit(pid int) {
	fd, ok := openPath(w.path.of(pid, pid, "children"))
	if !ok {
		w.vanished = true
		return
	}
	w.listChildren(fd)
	p, ok := w.readStat(pid)
	if !ok {
		w.vanished = true
		return
	}
	w.found(p)
}

// readStat reads process pid's stat after its main thread's children
// file, and the other threads' files before reading it again.
func (w *walker) readStat(pid int) (procInfo, bool) {
	p, ok := readProcInto(pid, w.stat[:])
	if ok && p.threads > 1 {
		w.threadsBelow(pid, pid)
		p, ok = readProcInto(pid, w.stat[:])
	}
	return p, ok
}

// found adds p, read after its lists, to the walk's findings.
func (w *walker) found(p procInfo) {
	if p.state == 'Z' || p.state == 'X' {
		w.dead = append(w.dead, p.key())
	}
	w.out = append(w.out, p)
}

// threadsBelow lists the children of every thread of process pid but
// skip (its main thread, whose file visit read).
func (w *walker) threadsBelow(pid, skip int) {
	// Each thread's file is opened from the task directory's descriptor:
	// a path walk from /proc costs a quarter of a read.
	dir, ok := openPath(w.path.of(pid, -1, "task"))
	if !ok {
		return
	}
	defer syscall.Close(dir)
	w.tids = w.taskIDs(dir, w.tids[:0])
	for _, tid := range w.tids {
		if tid == skip {
			continue
		}
		b := strconv.AppendInt(w.path[:0], int64(tid), 10)
		b = append(append(b, "/children"...), 0)
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dir), uintptr(unsafe.Pointer(&b[0])),
			syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
		if errno == 0 {
			w.listChildren(int(fd))
		}
	}
}

// listChildren queues the pids listed in fd, an open children file, that
// are not queued yet (a process re-parented during the walk may be listed
// twice), and closes it.
func (w *walker) listChildren(fd int) {
	defer syscall.Close(fd)
	// A page is one pass of the kernel (see above). A thread with more
	// children than a page holds (some 500) is read on, by position: a
	// child that left the list between two reads shifts the rest, and one
	// of them may be skipped; such a walk is not trusted.
	num, digits := 0, false
	for reads := 0; ; reads++ {
		n, err := syscall.Read(fd, w.buf[:])
		if err != nil || n <= 0 {
			break
		}
		if reads > 0 {
			w.inexact = true
		}
		for _, c := range w.buf[:n] {
			if c >= '0' && c <= '9' {
				num, digits = num*10+int(c-'0'), true
				continue
			}
			if digits {
				w.enqueue(num)
			}
			num, digits = 0, false
		}
	}
	if digits {
		w.enqueue(num)
	}
}

func (w *walker) enqueue(pid int) {
	for _, q := range w.queue {
		if q == pid {
			return
		}
	}
	w.queue = append(w.queue, pid)
}

// taskIDs lists fd, an open /proc/PID/task, with getdents64 into the
// walker's buffer.
func (w *walker) taskIDs(fd int, dst []int) []int {
	for {
		n, err := syscall.ReadDirent(fd, w.buf[:])
		if err != nil || n <= 0 {
			return dst
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := w.buf[:n]; len(b) >= 19; {
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < 19 || reclen > len(b) {
				break
			}
			tid, digits := 0, false
			for _, c := range b[19:reclen] {
				if c < '0' || c > '9' {
					break
				}
				tid, digits = tid*10+int(c-'0'), true
			}
			if digits {
				dst = append(dst, tid)
			}
			b = b[reclen:]
		}
	}
}
