package procgroup

import (
	"sync"
	"time"
)

// observeEvery is how often the process table is read while children live,
// to remember descendants before they can leave the group (setsid) and lose
// their parent. One read serves every live child.
const observeEvery = 50 * time.Millisecond

var registry = &liveChildren{children: make(map[*Child]struct{}), marks: make(map[procKey]string)}

// table is the incremental process table the watcher and teardowns share.
var table = &procTable{}

// liveChildren is the set of children not yet torn down.
type liveChildren struct {
	mu        sync.Mutex
	children  map[*Child]struct{}
	watching  bool
	subreaper bool
	// subtree says the process table can be read as acpflow's subtree
	// (subtree_linux.go): the subreaper was enabled before any spawn.
	subtree bool
	// spawned says a spawn has begun: an orphan of a process started
	// before the subreaper was enabled went to init, out of the subtree.
	spawned bool
	// starting counts spawns under way: a child between fork and add is
	// acpflow's child but not yet registered, and must not be taken for
	// an orphan.
	starting int
	// marks caches the markers of orphans (see orphanMarks).
	marks map[procKey]string
}

// begin marks a spawn under way; the returned func ends it, after add (or
// after a failed start).
func (r *liveChildren) begin() (end func()) {
	r.mu.Lock()
	r.starting++
	r.spawned = true
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.starting--
		r.mu.Unlock()
	}
}

func (r *liveChildren) add(c *Child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.children[c] = struct{}{}
	if !r.watching {
		r.watching = true
		go r.watch()
	}
}

func (r *liveChildren) remove(c *Child) {
	r.mu.Lock()
	delete(r.children, c)
	r.mu.Unlock()
}

// watch records descendants of every live child until none is left.
func (r *liveChildren) watch() {
	t := time.NewTicker(observeEvery)
	defer t.Stop()
	for range t.C {
		r.mu.Lock()
		live := make([]*Child, 0, len(r.children))
		for c := range r.children {
			live = append(live, c)
		}
		if len(live) == 0 {
			r.watching = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		procs := table.read()
		marks := r.orphanMarks(procs)
		for _, c := range live {
			c.observe(procs, marks)
		}
	}
}

// onlyLive reports whether orphans adopted by acpflow can be attributed to
// c: acpflow is a subreaper and c is the only live child.
func (r *liveChildren) onlyLive(c *Child) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.children[c]
	return r.subreaper && ok && len(r.children) == 1 && r.starting == 0
}

// adopted reports whether pid, a child of acpflow, is one it adopted as
// the subreaper, whose exit status no exec.Cmd waits for: not a live
// child's leader, and no spawn under way (whose child is not registered
// yet).
func (r *liveChildren) adopted(pid int) bool {
	if isOwn(pid) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.starting > 0 {
		return false
	}
	for c := range r.children {
		if c.pid == pid {
			return false
		}
	}
	return true
}

// isLeader reports whether pid is the leader of a live child (acpflow's own
// exec'd process, whose exit status belongs to its exec.Cmd).
func (r *liveChildren) isLeader(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.children {
		if c.pid == pid {
			return true
		}
	}
	return false
}

// KillAll sends SIGKILL to the group of every live child: the second
// interrupt, when the user will not wait for the graces. Each child's
// Teardown still runs, finds its group gone, and reaps.
func KillAll() {
	registry.mu.Lock()
	live := make([]*Child, 0, len(registry.children))
	for c := range registry.children {
		live = append(live, c)
	}
	registry.mu.Unlock()
	for _, c := range live {
		c.Kill()
	}
}

// leadersBut returns the leaders of the live children but c, pid → start
// time: a walk for c's teardown reads them but not their subtrees.
func (r *liveChildren) leadersBut(c *Child) map[int]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]uint64, len(r.children))
	for o := range r.children {
		if o != c {
			out[o.pid] = o.start
		}
	}
	return out
}

// isLive reports whether c is registered (not torn down yet).
func (r *liveChildren) isLive(c *Child) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.children[c]
	return ok
}
