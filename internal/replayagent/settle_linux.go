package replayagent

import (
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// settleLimit bounds the wait for the client to read a divergence from stderr.
const settleLimit = time.Second

// settle waits, at most settleLimit, until the reader of w, a pipe, has read all that was
// written to it: acpflow puts the agent's last stderr lines in a failed step's error when the
// turn ends, and reads stderr on its own goroutine, so a refusal sent at once could overtake
// the line that explains it. Anything other than a pipe is not waited for.
func settle(w io.Writer) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	for deadline := time.Now().Add(settleLimit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		// TIOCINQ (FIONREAD) on either end of a pipe: the bytes not yet read.
		var unread int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&unread))); errno != 0 || unread == 0 {
			return
		}
	}
}
