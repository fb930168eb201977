package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's TCP rules (ABI 4) cover plain TCP only, and UDP only from
// ABI 10: measured on this kernel (ABI 7), an MPTCP connect to any port
// passes a sandbox that allows one, and UDP (QUIC, DNS) reaches anywhere.
// So network "proxy" also installs a seccomp filter that lets an agent
// create, in the inet families, only plain TCP sockets (SOCK_STREAM with
// protocol 0 or IPPROTO_TCP), which Landlock then confines; UDP, MPTCP,
// SCTP and the rest fail with EACCES. io_uring can create sockets without
// the socket syscall, so io_uring_setup fails with ENOSYS (its users fall
// back to plain syscalls, as they must where io_uring is disabled).

// arch is what the filter needs to know of an architecture: its audit
// arch, socket's syscall number, and those of the compat ABI it can also
// run (0 when none).
type arch struct {
	native, compat       uint32
	socket, compatSocket uint32
	compatSocketcall     uint32 // a socketcall multiplexer hides socket's arguments, so it is refused
	ioUringSetup         uint32 // the same number in every ABI since 5.1
	x32                  bool   // syscall numbers may carry the x32 bit
}

var arches = map[string]arch{
	"amd64": {native: unix.AUDIT_ARCH_X86_64, compat: unix.AUDIT_ARCH_I386, socket: 41, compatSocket: 359, compatSocketcall: 102, ioUringSetup: 425, x32: true},
	"arm64": {native: unix.AUDIT_ARCH_AARCH64, compat: unix.AUDIT_ARCH_ARM, socket: 198, compatSocket: 281, compatSocketcall: ^uint32(0), ioUringSetup: 425},
}

// proxyFilterSupported says whether this architecture has the filter
// network "proxy" needs.
func proxyFilterSupported() bool {
	_, ok := arches[runtime.GOARCH]
	return ok
}

// seccomp_data offsets: nr, arch, then the arguments as 64-bit slots, of
// which a little-endian load of 32 bits reads the low half (every value
// checked here fits in it).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

// filterRules say what the socket filter refuses besides io_uring, which
// can create sockets the filter would not see.
type filterRules struct {
	// tcpOnly: in the inet families, only plain TCP sockets (network
	// "proxy", whose Landlock TCP rules cover nothing else).
	tcpOnly bool
	// noUnix: no unix socket (network "off" and "proxy"): a path socket
	// outside the sandbox (docker.sock, an ssh agent, D-Bus) would be a
	// way out that Landlock before ABI 9 does not see. socketpair, which
	// reaches nothing outside, stays allowed.
	noUnix bool
}

// socketFilter installs the filter on the calling thread, which the agent
// is forked from. no_new_privs, which an unprivileged filter needs, is
// already set.
func socketFilter(f filterRules) error {
	a, ok := arches[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no socket filter for %s", runtime.GOARCH)
	}
	nrMask := ^uint32(0)
	if a.x32 {
		nrMask = ^uint32(0x40000000)
	}
	var p prog
	p.ld(offArch)
	p.jeq(a.native, "native", "")
	p.jeq(a.compat, "compat", "allow")

	p.label("native")
	p.ld(offNr)
	p.and(nrMask)
	p.jeq(a.socket, "socket", "")
	p.jeq(a.ioUringSetup, "enosys", "allow")

	p.label("compat")
	p.ld(offNr)
	p.jeq(a.compatSocketcall, "eacces", "")
	p.jeq(a.compatSocket, "socket", "")
	p.jeq(a.ioUringSetup, "enosys", "allow")

	p.label("socket")
	p.ld(offArg0)
	if f.noUnix {
		p.jeq(unix.AF_UNIX, "eacces", "")
	}
	if f.tcpOnly {
		p.jeq(unix.AF_INET, "inet", "")
		p.jeq(unix.AF_INET6, "inet", "allow")
		p.label("inet")
		p.ld(offArg1)
		p.and(0xf) // SOCK_TYPE_MASK: without SOCK_NONBLOCK and SOCK_CLOEXEC
		p.jeq(unix.SOCK_STREAM, "", "eacces")
		p.ld(offArg2)
		p.jeq(0, "allow", "")
		p.jeq(unix.IPPROTO_TCP, "allow", "eacces")
	}

	p.label("allow")
	p.ret(unix.SECCOMP_RET_ALLOW)
	p.label("eacces")
	p.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	p.label("enosys")
	p.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))

	insns, err := p.assemble()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(insns)
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// prog is a classic BPF program with symbolic jump targets; "" means the
// next instruction.
type prog struct {
	insns  []unix.SockFilter
	jumps  map[int][2]string
	labels map[string]int
}

func (p *prog) emit(code uint16, k uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: code, K: k})
}

func (p *prog) ld(off uint32) { p.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (p *prog) and(k uint32)  { p.emit(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, k) }
func (p *prog) ret(k uint32)  { p.emit(unix.BPF_RET|unix.BPF_K, k) }

func (p *prog) jeq(k uint32, jt, jf string) {
	if p.jumps == nil {
		p.jumps = map[int][2]string{}
	}
	p.jumps[len(p.insns)] = [2]string{jt, jf}
	p.emit(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k)
}

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insns)
}

func (p *prog) assemble() ([]unix.SockFilter, error) {
	for i, j := range p.jumps {
		for n, name := range j {
			off := 0
			if name != "" {
				to, ok := p.labels[name]
				if !ok || to <= i || to-i-1 > 255 {
					return nil, fmt.Errorf("seccomp filter: bad jump to %q", name)
				}
				off = to - i - 1
			}
			if n == 0 {
				p.insns[i].Jt = uint8(off)
			} else {
				p.insns[i].Jf = uint8(off)
			}
		}
	}
	return p.insns, nil
}
