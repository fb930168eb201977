package replayagent

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestSettleWaitsUntilThePipeWasRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	w.WriteString("replay: a divergence\n")
	var read atomic.Bool
	go func() {
		time.Sleep(50 * time.Millisecond)
		buf := make([]byte, 64)
		r.Read(buf)
		read.Store(true)
	}()
	settle(w)
	if !read.Load() {
		// The read may have returned an instant before the flag was set.
		time.Sleep(10 * time.Millisecond)
		if !read.Load() {
			t.Error("settle returned before the line was read")
		}
	}
}
