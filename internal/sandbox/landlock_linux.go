package sandbox

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is spoken here through its three system calls, as x/sys/unix
// defines them, not through go-landlock: that module links libpsx, which
// with cgo on (go build's default wherever a C compiler is) makes the
// launcher a dynamically linked cgo program, and the launcher's start is
// most of what a sandboxed spawn costs (DESIGN.md, "The launcher speaks
// Landlock itself"). The launcher restricts only the thread it forks the
// agent from, so psx's all-threads machinery was never needed.

// access is a set of Landlock filesystem rights (LANDLOCK_ACCESS_FS_*).
type access uint64

// Filesystem rights, each with the ABI version that added it.
const (
	fsExecute     access = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile   access = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile    access = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir     access = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRemoveDir   access = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	fsRemoveFile  access = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	fsMakeChar    access = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	fsMakeDir     access = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	fsMakeReg     access = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	fsMakeSock    access = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	fsMakeFifo    access = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	fsMakeBlock   access = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	fsMakeSym     access = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer       access = unix.LANDLOCK_ACCESS_FS_REFER        // ABI 2
	fsTruncate    access = unix.LANDLOCK_ACCESS_FS_TRUNCATE     // ABI 3
	fsIoctlDev    access = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV    // ABI 5
	fsResolveUnix access = unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX // ABI 9
)

// handledFS is every filesystem right the kernel of Landlock ABI abi
// knows: all of them are handled, so what no rule grants is denied.
func handledFS(abi int) access {
	h := fsExecute | fsWriteFile | fsReadFile | fsReadDir | fsRemoveDir | fsRemoveFile |
		fsMakeChar | fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym
	for _, r := range []struct {
		abi   int
		right access
	}{{2, fsRefer}, {3, fsTruncate}, {5, fsIoctlDev}, {9, fsResolveUnix}} {
		if abi >= r.abi {
			h |= r.right
		}
	}
	return h
}

// handledNet is every network right of ABI abi: TCP from 4, UDP from 10.
func handledNet(abi int) uint64 {
	var h uint64
	if abi >= 4 {
		h |= unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 10 {
		h |= unix.LANDLOCK_ACCESS_NET_BIND_UDP | unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP
	}
	return h
}

// scoped is every scope of ABI abi: abstract unix sockets and signals
// from 6.
func scoped(abi int) uint64 {
	if abi >= 6 {
		return unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return 0
}

// landlockABI is the kernel's Landlock ABI version, or an error when
// Landlock is not built in or not enabled.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// ruleset is a Landlock ruleset being built for the kernel of ABI abi.
type ruleset struct {
	fd  int
	abi int
	fs  access
}

// newRuleset handles every right and scope the kernel knows; net says
// whether network rights are handled too (network "proxy").
func newRuleset(net bool) (*ruleset, error) {
	abi, err := landlockABI()
	if err != nil {
		return nil, fmt.Errorf("Landlock: %w", err)
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: uint64(handledFS(abi)), Scoped: scoped(abi)}
	if net {
		attr.Handled_access_net = handledNet(abi)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), attrSize(abi), 0) // its fd is close-on-exec
	if errno != 0 {
		return nil, fmt.Errorf("creating a Landlock ruleset: %w", errno)
	}
	return &ruleset{fd: int(fd), abi: abi, fs: handledFS(abi)}, nil
}

// attrSize is how much of the ruleset attribute the kernel of ABI abi
// reads: the scopes field came with 6, the network one with 4.
func attrSize(abi int) uintptr {
	switch {
	case abi >= 6:
		return 24
	case abi >= 4:
		return 16
	}
	return 8
}

// allowPath grants rights beneath path (a directory) or on it (a file),
// less what the kernel does not handle. A path that is gone is skipped.
func (r *ruleset) allowPath(path string, rights access) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s for a Landlock rule: %w", path, err)
	}
	defer unix.Close(fd)
	attr := unix.LandlockPathBeneathAttr{Allowed_access: uint64(rights & r.fs), Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(r.fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("Landlock rule for %s: %w", path, errno)
	}
	return nil
}

// netPortAttr is struct landlock_net_port_attr, which x/sys/unix lacks.
type netPortAttr struct {
	allowed uint64
	port    uint64
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT.
const ruleNetPort = 2

// allowConnectTCP grants a TCP connect to port.
func (r *ruleset) allowConnectTCP(port int) error {
	attr := netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(r.fd), ruleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("Landlock rule for TCP port %d: %w", port, errno)
	}
	return nil
}

// restrictSelf sets no_new_privs and enforces the ruleset on the calling
// thread (which the caller has locked); denials of the programs it
// execs are logged to the audit subsystem where the kernel can (ABI 7).
func (r *ruleset) restrictSelf() error {
	defer unix.Close(r.fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	var flags uintptr
	if r.abi >= 7 {
		flags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.fd), flags, 0); errno != 0 {
		return os.NewSyscallError("landlock_restrict_self", errno)
	}
	return nil
}
