package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink audit (linux/audit.h).
const (
	auditGet           = 1000
	auditNlgrpReadlog  = 1 // the multicast group of every record, read-only
	auditStatusEnabled = 1 // audit_status.enabled's offset, in uint32s
)

// DenialWatch reads the kernel's audit log for what Landlock refuses one
// spawn's processes. WatchDenials opens it before the spawn, so that no
// record is missed; Attach names the launcher's pid once it runs; Denials
// says what was counted; Close stops it.
type DenialWatch struct {
	f   *os.File // the audit socket, bound to the read-only log group
	log denialLog
	end chan struct{}
}

// WatchDenials starts reading the kernel's audit log, or says why the
// kernel's refusals cannot be read here.
//
// # Notes
//
// Reading needs the host's user and PID namespaces (a record's pid is the
// host's), root's CAP_AUDIT_CONTROL (to ask whether audit is on) and
// CAP_AUDIT_READ (to read the log), audit turned on (auditd running,
// `auditctl -e 1`, or audit=1 at boot: acpflow never turns it on, since
// that is the whole machine's setting and, with no auditd, every record
// also goes to the kernel log), and Landlock ABI 7.
func WatchDenials() (*DenialWatch, error) {
	if abi := Probe().LandlockABI; abi < 7 {
		return nil, fmt.Errorf("Landlock ABI %d logs no denials (ABI 7 does)", abi)
	}
	if err := auditOn(); err != nil {
		return nil, err
	}
	return openWatch()
}

// openWatch opens the audit socket on the read-only log group and starts
// reading it.
func openWatch() (*DenialWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("opening the audit socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (auditNlgrpReadlog - 1)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("reading the audit log needs CAP_AUDIT_READ: %w", err)
	}
	w := &DenialWatch{f: os.NewFile(uintptr(fd), "audit"), end: make(chan struct{})}
	go w.read()
	return w, nil
}

// auditOn asks the kernel whether audit is on (AUDIT_GET), which also
// proves that acpflow runs in the host's namespaces with the capability.
func auditOn() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return errors.New("the kernel has no audit support")
	}
	if err != nil {
		return fmt.Errorf("opening the audit socket: %w", err)
	}
	defer unix.Close(fd)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	req := make([]byte, unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint32(req[0:], unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("asking whether audit is on: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("asking whether audit is on: %w", err)
		}
		if n < unix.SizeofNlMsghdr+4 {
			return errors.New("asking whether audit is on: a short answer")
		}
		switch binary.NativeEndian.Uint16(buf[4:]) {
		case unix.NLMSG_ERROR:
			if e := syscall.Errno(-int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:]))); e != 0 {
				return auditRefusal(e)
			}
		case auditGet:
			if binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr+4*auditStatusEnabled:]) == 0 {
				return errors.New("the kernel's audit is off (auditd, `auditctl -e 1` or audit=1 at boot turns it on)")
			}
			return nil
		}
	}
}

// auditRefusal says why the kernel would not answer AUDIT_GET.
func auditRefusal(e syscall.Errno) error {
	switch {
	case e == unix.ECONNREFUSED:
		return errors.New("acpflow runs in a user namespace of its own (a container): the kernel serves its audit log to the host's only")
	case e == unix.EPERM && os.Geteuid() != 0:
		return errors.New("acpflow does not run as root: the audit log needs CAP_AUDIT_CONTROL and CAP_AUDIT_READ")
	case e == unix.EPERM:
		return errors.New("acpflow runs in a PID namespace of its own (a container) or without CAP_AUDIT_CONTROL: the audit log's pids would not be its own")
	}
	return fmt.Errorf("asking whether audit is on: %w", e)
}

// read feeds the log every record until Close. Each record is one
// datagram; its nlmsg_len is not padded as netlink's parsers expect, so
// the header is read by hand.
func (w *DenialWatch) read() {
	defer close(w.end)
	buf := make([]byte, 1<<16)
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			w.log.mu.Lock()
			w.log.lost = true
			w.log.mu.Unlock()
			continue
		}
		if err != nil {
			return // closed
		}
		if n < unix.SizeofNlMsghdr {
			continue
		}
		typ := int(binary.NativeEndian.Uint16(buf[4:]))
		end := min(n, int(binary.NativeEndian.Uint32(buf[0:])))
		if end < unix.SizeofNlMsghdr {
			end = n
		}
		w.log.add(typ, string(buf[unix.SizeofNlMsghdr:end]))
	}
}

// Attach names the launcher's pid (as acpflow sees it, which in the
// host's PID namespace is the audit log's): the domain it made is the
// spawn's.
func (w *DenialWatch) Attach(pid int) {
	if w == nil {
		return
	}
	w.log.mu.Lock()
	w.log.pid = pid
	w.log.mu.Unlock()
}

// settle is how long Denials waits for the log to go quiet, and at most:
// records reach the socket through the kernel's audit thread, a few ms
// after the denial (measured: 1–5 ms at idle).
const (
	settleQuiet = 20 * time.Millisecond
	settleMax   = 200 * time.Millisecond
)

// Denials is what Landlock refused the spawn so far, once the records
// still on their way have arrived (the log quiet for settleQuiet since the
// call, at most settleMax).
func (w *DenialWatch) Denials() Denials {
	if w == nil {
		return Denials{}
	}
	asked := time.Now()
	for time.Since(asked) < settleMax {
		w.log.mu.Lock()
		quiet := time.Since(w.log.last)
		w.log.mu.Unlock()
		// A denial just before the call may not have arrived yet: the
		// quiet counts from the call at the earliest.
		quiet = min(quiet, time.Since(asked))
		if quiet >= settleQuiet {
			break
		}
		time.Sleep(settleQuiet - quiet)
	}
	return w.log.snapshot()
}

// Close stops reading; after the spawn has ended.
func (w *DenialWatch) Close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.end
}
