package procgroup

import (
	"os"
	"syscall"
	"time"
)

// Bounds of the closing sweep (killStrays).
const (
	// stopWait bounds how long one round waits for the processes it sent
	// SIGSTOP to be stopped.
	stopWait = time.Second
	// sweepLimit bounds the rounds: each finds what the last one's stopped
	// processes started before they stopped, so a round finds nothing new
	// after a few.
	sweepLimit = 5 * time.Second
	// blankWait is how long an orphan whose environment reads empty is read
	// again: a process in the middle of execve has none for that moment.
	blankWait = 20 * time.Millisecond
)

// killStrays kills everything the child started that is still alive once
// its group is gone (or was SIGKILLed), and returns how many it killed.
//
// # Notes
//
// Killing what one read of the process table shows races whatever those
// processes start meanwhile: a daemon's fork between the read and the kill
// is orphaned unseen (a shell that forks in a loop, a daemon that re-forks
// and exits, a setsid spawn still under way when the turn ends). So the
// sweep freezes before it kills. Each round reads the table afresh and
// takes the child's strays not yet stopped: processes seen below it while
// it lived, members of its group, orphans re-parented to acpflow (the
// subreaper) that carry its marker (every orphan when it is the only live
// child), and every descendant of those, by their parents as they are now.
// It sends them SIGSTOP and waits until they are stopped: a stopped
// process cannot fork, and what it forked before it stopped is in the
// table by then, below it. The rounds end when one finds nothing new and
// nothing in flux; then every stopped process is SIGKILLed (which ends a
// stopped process too) and waited for.
//
// As the subreaper, a round reads the part of acpflow's subtree the
// child's strays can be in instead of the whole table (freshFor): its
// subtree and acpflow's orphans', and its walk's races are closed by the
// same rounds (subtree_linux.go says why).
//
// A read of the table lists the pids first and reads each after: a
// process listed alive may have forked and died by the time it is read,
// its child born after the listing. Such a process is read as a zombie,
// so a round that meets a zombie it had not met (an orphan's, or one below
// a stray) is not the last: the next listing has the child.
func (c *Child) killStrays() int {
	stopped := map[procKey]procInfo{}
	zombies := map[procKey]bool{}
	blankSince := map[procKey]time.Time{}
	for begin := time.Now(); time.Since(begin) < sweepLimit; {
		procs := freshFor(c)
		// Read after the table: a spawn under way then is either
		// registered (a leader) or still counted as starting.
		only := registry.onlyLive(c)
		r := c.strays(procs, stopped, zombies, only)
		for _, p := range r.zombies {
			zombies[p.key()] = true
		}
		// Only a zombie known to be this child's is reaped (any, when it
		// is the only live child): another teardown's next round may be
		// about to read it, and a zombie that vanishes between the listing
		// and the read hides the child it left (see above).
		for _, p := range r.ours {
			if registry.adopted(p.pid) {
				reap(p.pid)
			}
		}
		if len(r.found) == 0 {
			if len(r.zombies) > 0 {
				continue
			}
			// An orphan whose environment read empty may be in the middle
			// of execve: read it again for a moment before taking it for
			// one that has no marker.
			if !stillBlank(r.blank, blankSince) {
				break
			}
			time.Sleep(pollEvery)
			continue
		}
		c.remember(r.found)
		for _, p := range r.found {
			// The start time is checked just before the signal, and the
			// process cannot be reaped meanwhile but by its parent, which
			// is acpflow or a process found with it.
			if alive(p.key()) {
				syscall.Kill(p.pid, syscall.SIGSTOP)
			}
			stopped[p.key()] = p
		}
		waitStopped(r.found)
	}
	var live []procKey
	for k := range stopped {
		if alive(k) {
			live = append(live, k)
		}
	}
	for _, k := range live {
		syscall.Kill(k.pid, syscall.SIGKILL)
	}
	waitKeysGone(live)
	return len(live)
}

// stillBlank reports whether an orphan of blank has read empty for less
// than blankWait (since, per process, is when it first did).
func stillBlank(blank []procInfo, since map[procKey]time.Time) bool {
	now := time.Now()
	waiting := false
	for _, p := range blank {
		first, ok := since[p.key()]
		if !ok {
			since[p.key()], first = now, now
		}
		if now.Sub(first) < blankWait {
			waiting = true
		}
	}
	return waiting
}

// strayRound is what one read of the table says of a child's strays.
type strayRound struct {
	found []procInfo // live strays not stopped yet
	// blank are orphans that might be the child's but whose environment
	// read empty.
	blank []procInfo
	// zombies are dead orphans and dead processes below a stray, met for
	// the first time; ours those of them known to be the child's.
	zombies, ours []procInfo
}

// strays reads a child's strays in procs, a fresh read of the table (see
// killStrays for what a stray is). stopped are the strays already stopped,
// zombies the dead ones already met.
func (c *Child) strays(procs []procInfo, stopped map[procKey]procInfo, zombies map[procKey]bool, only bool) strayRound {
	var r strayRound
	self := os.Getpid()
	c.mu.Lock()
	seen := make(map[procKey]bool, len(c.seen))
	for k := range c.seen {
		seen[k] = true
	}
	c.mu.Unlock()
	children := make(map[int][]procInfo)
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	taken := make(map[int]bool)
	var queue []int
	take := func(p procInfo, known bool) {
		if taken[p.pid] || p.pid == self {
			return
		}
		if p.dead() {
			if !zombies[p.key()] {
				r.zombies = append(r.zombies, p)
				if known {
					r.ours = append(r.ours, p)
				}
			}
			return
		}
		taken[p.pid] = true
		queue = append(queue, p.pid)
		if _, ok := stopped[p.key()]; !ok {
			r.found = append(r.found, p)
		}
	}
	for _, p := range procs {
		if p.pid == self {
			continue
		}
		_, isStopped := stopped[p.key()]
		switch {
		case isStopped, seen[p.key()], p.pgid == c.pid:
			take(p, true)
		case p.ppid == self && registry.isLeader(p.pid):
		case p.ppid == self && isOwn(p.pid): // acpflow's own helper (RunOwn)
		case p.ppid == self && p.dead():
			take(p, only) // a zombie orphan: whose it was cannot be read
		case p.ppid == self:
			if only {
				take(p, true)
				continue
			}
			switch markerOf(p.pid) {
			case c.marker:
				take(p, true)
			case "":
				r.blank = append(r.blank, p)
			}
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, ch := range children[pid] {
			take(ch, false) // a zombie below a stray is its parent's to reap
		}
	}
	return r
}

// waitStopped waits (bounded by stopWait) until each process is stopped,
// dead, or in uninterruptible sleep: a process in the middle of vfork
// waits so until its child execs or exits, and that child is already in
// the table, below it.
func waitStopped(ps []procInfo) {
	deadline := time.Now().Add(stopWait)
	for _, p := range ps {
		for {
			q, ok := readProc(p.pid)
			if !ok || q.start != p.start {
				break
			}
			if settled(q) {
				break
			}
			if time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// settled reports whether p can start nothing more: stopped, dead, or in
// uninterruptible sleep; for a zombie main thread, whether every other
// thread is.
func settled(p procInfo) bool {
	switch p.state {
	case 'T', 't', 'D', 'X':
		return true
	case 'Z':
		return p.threads <= 1 || threadsSettled(p.pid)
	}
	return false
}
