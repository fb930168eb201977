package procgroup

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// drainLimit bounds the wait, at teardown, for the child's last words on
// stdout to be read before the pipe is closed; drainStall ends it sooner
// when the reader takes nothing for that long (it has stopped reading).
const (
	drainLimit = time.Second
	drainStall = 250 * time.Millisecond
)

// awaitDrained waits until the reader of the child's stdout has taken
// every byte the group wrote, at most drainLimit. Teardown closes the read
// end once the group is gone, to free a reader an escaped writer would
// hold forever; closed while bytes were still in the pipe, it would cut
// off what the child said last (an agent's request sent as it exits):
// the reader gets "file already closed" instead of the line, then EOF.
func (c *Child) awaitDrained() {
	deadline := time.Now().Add(drainLimit)
	last, changed := -1, time.Now()
	for time.Now().Before(deadline) {
		n, err := unread(c.stdout)
		if err != nil || n == 0 {
			return
		}
		if n != last {
			last, changed = n, time.Now()
		} else if time.Since(changed) > drainStall {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// unread is how many bytes wait in pipe f for its reader.
func unread(f *os.File) (int, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n, ierr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), fionread) }); err != nil {
		return 0, err
	}
	return n, ierr
}
