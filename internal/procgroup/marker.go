package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// MarkerVar is the environment variable every child is started with. Its
// value names the acpflow process that started the child (pid and start
// time) and the child itself (a sequence number): "PID-TICKS-SEQ".
//
// # Notes
//
// A process's initial environment (/proc/PID/environ) is fixed at exec and
// passed on to everything it forks and execs unless it is replaced, so the
// marker tells which child's tree an orphan came from after its parents
// are gone: a double-forked daemon re-parented to acpflow (the subreaper)
// is killed with its own step, not swept at the run's end. A process that
// was exec'd with a fresh environment carries no marker; it is attributed
// as before (swept when no other child lives).
const MarkerVar = "ACPFLOW_AGENT"

// self is this acpflow process, as markers name it.
var self = sync.OnceValue(func() string {
	pid := os.Getpid()
	ticks, _ := StartTicks(pid)
	return OwnerMarker(pid, ticks)
})

// childSeq numbers the children this process starts, for their markers.
var childSeq atomic.Uint64

// OwnerMarker is the prefix of the marker of every child that the acpflow
// process pid, started at ticks, started.
func OwnerMarker(pid int, ticks uint64) string {
	return strconv.Itoa(pid) + "-" + strconv.FormatUint(ticks, 10) + "-"
}

// newMarker names a new child.
func newMarker() string {
	return self() + strconv.FormatUint(childSeq.Add(1), 10)
}

// markedEnv is env with the marker set to marker (an inherited one, from an
// acpflow that runs acpflow, is replaced).
func markedEnv(env []string, marker string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, MarkerVar+"=") {
			out = append(out, kv)
		}
	}
	return append(out, MarkerVar+"="+marker)
}

// markerIn finds the marker in an environment block: NUL-separated
// KEY=VALUE entries, as /proc/PID/environ holds them. "" when it has none.
func markerIn(b []byte) string {
	key := []byte(MarkerVar + "=")
	for len(b) > 0 {
		kv := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if bytes.HasPrefix(kv, key) {
			return string(kv[len(key):])
		}
	}
	return ""
}

// orphanMarks reads the markers of the orphans in table: live processes
// re-parented to acpflow (the subreaper) that are not a live child's
// leader. Markers are cached by pid and start time, since they never change
// once read.
func (r *liveChildren) orphanMarks(table []procInfo) map[int]string {
	me := os.Getpid()
	var out map[int]string
	seen := make(map[procKey]bool)
	for _, p := range table {
		if p.ppid != me || p.dead() || r.isLeader(p.pid) {
			continue
		}
		k := p.key()
		seen[k] = true
		r.mu.Lock()
		m, ok := r.marks[k]
		r.mu.Unlock()
		if !ok {
			// An empty read is not kept: a process in the middle of
			// execve has no environment to read for that moment.
			m = markerOf(p.pid)
			if m != "" {
				r.mu.Lock()
				r.marks[k] = m
				r.mu.Unlock()
			}
		}
		if m == "" {
			continue
		}
		if out == nil {
			out = make(map[int]string)
		}
		out[p.pid] = m
	}
	r.mu.Lock()
	for k := range r.marks {
		if !seen[k] {
			delete(r.marks, k)
		}
	}
	r.mu.Unlock()
	return out
}
