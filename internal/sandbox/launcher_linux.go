package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main is the launcher: acpflow's hidden subcommand calls it with what
// follows the subcommand (nothing: what to do comes on the request pipe,
// fd 3, from Launch.Start) and exits with what it returns.
//
// It runs as PID 1 of new user, PID and mount namespaces (Command's clone
// flags). It reads its request, mounts the namespace's own /proc, applies
// Landlock to itself, starts the agent as its child with its own stdio
// and the request's environment and working directory, forwards SIGTERM,
// SIGINT and SIGHUP to it, reaps every process the namespace orphans, and
// returns the agent's exit code once the agent exits; its own exit then
// ends whatever the agent left running. It returns LaunchFailed, saying
// why on stderr, when it could not confine the agent; the agent has then
// not been started. A request pipe closed with nothing on it dismisses
// the launcher: it returns 0, having started nothing.
func Main(args []string) int {
	// First of all: PID 1 ignores a signal it has no handler for, and Go's
	// default handler would exit before the agent had a say.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	pid, err := launch(args)
	if errors.Is(err, errDismissed) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "acpflow sandbox: %v\n", err)
		return LaunchFailed
	}
	go func() {
		for s := range sigs {
			syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	return reap(pid)
}

// reap waits for the agent, reaping every orphan the namespace hands the
// launcher meanwhile, and returns the agent's exit code.
func reap(pid int) int {
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// No child left, and the agent's status was never seen:
			// cannot happen while the agent is our child.
			fmt.Fprintf(os.Stderr, "acpflow sandbox: waiting for the agent: %v\n", err)
			return LaunchFailed
		}
		if wpid != pid {
			continue // an orphan re-parented to us: reaped, nothing more
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// errDismissed is launch's when its request pipe closed empty.
var errDismissed = errors.New("dismissed before any request")

// receive reads the request from its pipe, which it closes: the agent
// must not inherit it.
func receive() (request, error) {
	f := os.NewFile(requestFD, "request")
	if f == nil {
		return request{}, errors.New("no request pipe (fd 3): start the launcher with Launch.Start")
	}
	defer f.Close()
	return readRequest(f)
}

// readRequest reads and checks the launcher's request.
func readRequest(r io.Reader) (request, error) {
	js, err := io.ReadAll(io.LimitReader(r, maxRequest+1))
	switch {
	case err != nil:
		return request{}, fmt.Errorf("reading the request: %w", err)
	case len(js) == 0:
		return request{}, errDismissed
	case len(js) > maxRequest:
		return request{}, fmt.Errorf("the request is over %d bytes", maxRequest)
	}
	var req request
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields() // a field this launcher does not know is a rule it would not enforce
	if err := dec.Decode(&req); err != nil {
		return request{}, fmt.Errorf("reading the request (%s and acpflow must come from the same build): %w", LauncherName, err)
	}
	if !filepath.IsAbs(req.Path) {
		return request{}, fmt.Errorf("agent path %q is not absolute", req.Path)
	}
	return req, req.Spec.validate()
}

// launch sets the sandbox up and starts the agent in it.
func launch(args []string) (int, error) {
	if len(args) != 0 {
		return 0, fmt.Errorf("unexpected arguments %q: %s and acpflow come from different builds; install them together", args, LauncherName)
	}
	if os.Getpid() != 1 {
		return 0, errors.New("not started in a PID namespace of its own (use Launch.Start)")
	}
	// The kernel is asked again here: the launcher is what enforces, and
	// best-effort Landlock would otherwise quietly enforce less.
	r := landlockReport()
	r.UserNS, r.PIDNS, r.NetNS = true, true, true
	// What does not depend on the request is done before the launcher
	// waits for it: one started ahead (Launch.Start) has done it by the
	// time its agent is known.
	if err := mountNamespace(); err != nil {
		return 0, err
	}
	// A new network namespace's loopback starts down; acpflow's is up
	// already, and left alone.
	lo := loopbackUp()
	if !requestWaiting() {
		prepare()
	}
	req, err := receive()
	if err != nil {
		return 0, err
	}
	spec := req.Spec
	if err := r.enforces(spec); err != nil {
		return 0, err
	}
	pr := spec.protection()
	if err := applyMounts(spec, pr); err != nil {
		return 0, err
	}
	if spec.ownNetns() && lo != nil {
		return 0, fmt.Errorf("bringing up loopback in the new network namespace: %w", lo)
	}
	if spec.network() == NetworkGateway {
		if err := handGatewayListener(spec.GatewayPort); err != nil {
			return 0, fmt.Errorf("listening for the gateway on 127.0.0.1:%d in the new network namespace: %w", spec.GatewayPort, err)
		}
	}
	return startAgent(req, pr)
}

// startAgent confines the launcher's thread and forks the agent from it.
func startAgent(req request, pr protection) (int, error) {
	devnull, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	// Capabilities, no_new_privs and Landlock are set on this thread
	// only, and the agent is forked from it: a process inherits its
	// forking thread's credentials. Doing it on every thread instead
	// (Landlock's TSYNC from ABI 8, or libpsx's signal round trips before
	// it) costs a round trip per thread and call, and the launcher's
	// other threads only wait and forward signals. The thread stays
	// locked: Go must never hand it to other work.
	runtime.LockOSThread()
	if err := dropCapabilities(); err != nil {
		return 0, fmt.Errorf("dropping capabilities: %w", err)
	}
	if err := restrict(req.Spec, pr); err != nil {
		return 0, fmt.Errorf("applying Landlock: %w", err)
	}
	// The launcher's own environment is procgroup's marker alone, which
	// the agent carries on.
	pid, err := syscall.ForkExec(req.Path, append([]string{req.Path}, req.Args...), &syscall.ProcAttr{
		Dir:   req.Spec.Cwd,
		Env:   append(req.Env, os.Environ()...),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", req.Path, err)
	}
	// The agent has its stdin and stdout now. The launcher lets go of its
	// copies, so that the agent closing stdout is EOF to acpflow as it is
	// without a sandbox. stderr stays for the launcher's own last words.
	unix.Dup3(int(devnull.Fd()), 0, 0)
	unix.Dup3(int(devnull.Fd()), 1, 0)
	return pid, nil
}

// mountNamespace makes the new mount namespace the agent's own: nothing
// mounted here propagates back, /proc shows only the sandbox's processes
// (so no other process's environment can be read), /dev/shm is a tmpfs
// of its own, and /dev/pts is a private devpts, so the agent's ptys are
// its own and the user's terminal is not among them.
func mountNamespace() error {
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if exists("/dev/shm") {
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mounting a private /dev/shm: %w", err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the sandbox's own /proc (a container that masks parts of /proc forbids it): %w", err)
	}
	if !exists("/dev/pts") || !exists("/dev/ptmx") {
		return nil
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mounting a private /dev/pts: %w", err)
	}
	if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the private /dev/ptmx: %w", err)
	}
	return nil
}

// Securebits (linux/securebits.h): a uid 0 gains no capabilities at exec,
// locked so that nothing below can undo it.
const (
	secbitNoroot       = 1 << 0
	secbitNorootLocked = 1 << 1
)

// dropCapabilities makes the agent start with none, whichever uid runs
// it: the launcher's ambient set (a normal user's way through exec) is
// cleared, and a root caller's uid 0 no longer grants the full set at
// exec. Capabilities in the sandbox's own namespaces reach nothing
// outside them, and Landlock forbids mounts anyway; this keeps the agent
// from even reconfiguring its own namespaces (its loopback, its /proc).
// Both are per-thread: this is the thread the agent forks from.
func dropCapabilities() error {
	// The inheritable set held the ambient capabilities; with no_new_privs
	// it could grant nothing, but an empty set needs no argument.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoroot|secbitNorootLocked, 0, 0, 0)
}

// loopbackUp brings up lo, which a new network namespace starts with down:
// an agent's tools may still talk to servers they start themselves.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// restrict applies Landlock and, for network "off", "gateway" and "proxy", the socket
// filter (seccomp_linux.go) to the calling thread, which the caller has
// locked and forks the agent from. It handles every right and scope the
// kernel knows (landlockReport has checked that this covers the spec):
// rights a newer kernel adds (pathname unix sockets at ABI 9, UDP at ABI
// 10) are then denied too, unless granted.
func restrict(spec Spec, pr protection) error {
	rs, err := newRuleset(spec.network() == NetworkProxy)
	if err != nil {
		return err
	}
	if err := fsGrants(spec, pr).addTo(rs); err != nil {
		unix.Close(rs.fd)
		return err
	}
	if spec.network() == NetworkProxy {
		if err := rs.allowConnectTCP(spec.ProxyPort); err != nil {
			unix.Close(rs.fd)
			return err
		}
	}
	if err := rs.restrictSelf(); err != nil {
		return err
	}
	switch spec.network() {
	case NetworkProxy:
		return socketFilter(filterRules{tcpOnly: true, noUnix: true})
	case NetworkOff, NetworkGateway:
		return socketFilter(filterRules{noUnix: true})
	}
	return nil
}

// requestWaiting says whether the request is on the pipe already (or the
// pipe closed): a launcher started for an agent already known, not ahead.
func requestWaiting() bool {
	fds := []unix.PollFd{{Fd: requestFD, Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// prepare does, before the launcher waits for its request, what would
// otherwise slow it once the request has come: page faults (about 11 µs
// each on the virtual machines acpflow is measured on) on its own code
// and data, and the JSON decoder's first look at a request's types.
func prepare() {
	exe, _ := os.Readlink("/proc/self/exe")
	maps, _ := os.ReadFile("/proc/self/maps")
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		advice := unix.MADV_POPULATE_READ
		if strings.Contains(f[1], "w") {
			advice = unix.MADV_POPULATE_WRITE
		}
		unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice))
	}
	js, _ := json.Marshal(request{Spec: Spec{Write: []string{"/"}, StateDirs: []string{"/"}, Deny: []string{"/"}, Protect: []string{"/"}}, Args: []string{""}, Env: []string{""}})
	readRequest(bytes.NewReader(js))
}

// handGatewayListener listens on 127.0.0.1:port in the agent's network
// namespace and sends the listening socket to acpflow over the gateway
// channel (fd 4, a unix socketpair: SCM_RIGHTS), then closes both here,
// before the agent exists. A socket stays in the namespace it was made
// in: acpflow accepts, outside, the connections the agent makes inside,
// and holds the port for the agent's whole life, so the agent can
// neither reach anything else nor take the port over.
func handGatewayListener(port int) error {
	if _, err := unix.FcntlInt(gatewayFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return fmt.Errorf("no gateway channel (fd %d): start the launcher with Launch.StartGateway: %w", gatewayFD, err)
	}
	defer unix.Close(gatewayFD)
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err := unix.Listen(ln, unix.SOMAXCONN); err != nil {
		return err
	}
	return unix.Sendmsg(gatewayFD, []byte{'L'}, unix.UnixRights(ln), nil, 0)
}
