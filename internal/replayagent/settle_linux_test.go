package replayagent

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func TestSettleWaitsUntilThePipeWasRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	w.WriteString("replay: a divergence\n")
	go func() {
		time.Sleep(50 * time.Millisecond)
		buf := make([]byte, 64)
		r.Read(buf)
	}()
	settle(w)
	// What the pipe holds when settle returns, not a flag the reader sets
	// a scheduling moment after its read (a loaded machine widens that).
	var unread int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, w.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&unread))); errno != 0 {
		t.Fatal(errno)
	}
	if unread != 0 {
		t.Errorf("settle returned with %d bytes not yet read", unread)
	}
}
