package acpsubagent

import (
	"strings"
	"testing"
	"time"
)

// The mode guard's set-backs in flight are bounded: past maxRestores the
// turn fails instead of starting one more, and a finished one frees its
// place.
func TestSetBacksInFlightAreBounded(t *testing.T) {
	c := &client{failed: make(chan struct{})}
	release, started := make(chan struct{}), make(chan struct{}, maxRestores)
	for range maxRestores {
		c.goRestore(func() { started <- struct{}{}; <-release })
	}
	for range maxRestores {
		<-started
	}
	ran := false
	c.goRestore(func() { ran = true })
	if err := c.turnFailure(); err == nil || !strings.Contains(err.Error(), "still setting them back") || ran {
		t.Fatalf("one past the bound: ran %v, turn failure %v", ran, err)
	}
	close(release)
	done := make(chan struct{})
	for {
		c.mu.Lock()
		n := c.restores
		c.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.goRestore(func() { close(done) })
	<-done
}
