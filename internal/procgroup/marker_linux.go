package procgroup

import (
	"os"
	"strconv"
	"syscall"
)

// markerOf reads the marker in the initial environment of process pid: ""
// when it has none or cannot be read (gone, or another user's).
func markerOf(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := readEnviron(dir + "/environ")
	if err != nil {
		// A process whose main thread exited while others run on (a
		// zombie with threads) has no environment to read there: a live
		// thread's is the process's.
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			if b, err = readEnviron(dir + "/task/" + t.Name() + "/environ"); err == nil && len(b) > 0 {
				break
			}
		}
	}
	if err != nil {
		return ""
	}
	return markerIn(b)
}

// environLimit bounds how much of an environment is read (Linux's own
// limit on argv plus envp is a quarter of the stack limit, 2 MiB by default).
const environLimit = 4 << 20

func readEnviron(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 8<<10)
	for len(buf) < environLimit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}
