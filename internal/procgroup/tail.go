package procgroup

import (
	"strings"
	"sync"
)

// Tail keeps the last bytes written to it. A child's stderr goes here: an
// agent that logs without end must not grow acpflow's memory, and the end
// of the log is what explains a failure.
type Tail struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

// NewTail returns a Tail that keeps the last limit bytes.
func NewTail(limit int) *Tail { return &Tail{limit: limit} }

// Write implements io.Writer; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		t.truncated = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// LastLines returns at most n of the last non-empty lines, joined by "\n".
func (t *Tail) LastLines(n int) string {
	s := strings.TrimRight(t.String(), "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if t.truncatedHead() && len(lines) > 1 {
		lines = lines[1:] // the first kept line may be cut in the middle
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (t *Tail) truncatedHead() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.truncated
}
