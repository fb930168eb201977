package procgroup

// procInfo is what the process table says of one process, in Linux's
// words (state is /proc's letter; proctable_darwin.go translates). The
// start time (in clock ticks since boot on Linux, microseconds since the
// epoch on macOS) tells a process from a later one that reused
// its pid, so a remembered pid is only signalled while it is the same process.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64
	threads              int
}

// dead reports whether the process has ended: a zombie (or dying) with no
// thread left. A zombie that still has threads is a process whose main
// thread exited while others run on (pthread_exit, or the other threads
// of an exit_group not yet gone): its children are still its own, and
// killing it is still needed.
func (p procInfo) dead() bool {
	return p.state == 'X' || p.state == 'Z' && p.threads <= 1
}

// procKey names one process for its whole life.
type procKey struct {
	pid   int
	start uint64
}

func (p procInfo) key() procKey { return procKey{p.pid, p.start} }

// descendants returns every process below root in the table (not root itself).
func descendants(table []procInfo, root int) []procInfo {
	children := make(map[int][]procInfo, len(table))
	for _, p := range table {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive reports whether the process k still exists and is not dead.
func alive(k procKey) bool {
	p, ok := readProc(k.pid)
	return ok && p.start == k.start && !p.dead()
}

// cpuUse is the CPU a set of processes has used, in clock ticks, and
// whether any of them is on a CPU or in uninterruptible (disk) sleep now;
// groupCPU adds who they were.
type cpuUse struct {
	ticks   uint64
	running bool
	members uint64 // a fingerprint of which processes were read
}
