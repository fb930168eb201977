//go:build linux

package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// The test binary is both the launcher (as acpflow's hidden subcommand
// would be) and the agent, so every test runs real processes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox-launch":
			os.Exit(Main(os.Args[2:]))
		case "sandbox-agent":
			os.Exit(agent(os.Args[2:]))
		}
	}
	if err := procgroup.EnableSubreaper(); err != nil {
		panic(err)
	}
	code := m.Run()
	DismissWaiting()
	os.Exit(code)
}

// agent does one thing and says how it went on stdout: "ok", or the
// error's errno name ("EACCES"), exiting 0 either way unless asked to exit
// otherwise.
func agent(args []string) int {
	say := func(err error) int {
		if err == nil {
			fmt.Println("ok")
			return 0
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			fmt.Println(unixName(errno))
		} else {
			fmt.Println("error:", err)
		}
		return 0
	}
	switch args[0] {
	case "write":
		return say(os.WriteFile(args[1], []byte("x"), 0o600))
	case "read":
		_, err := os.ReadFile(args[1])
		return say(err)
	case "append":
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString("x")
			f.Close()
		}
		return say(err)
	case "mkdir":
		return say(os.Mkdir(args[1], 0o700))
	case "rename":
		return say(os.Rename(args[1], args[2]))
	case "remove":
		return say(os.Remove(args[1]))
	case "unix":
		c, err := net.DialTimeout("unix", args[1], 2*time.Second)
		if err == nil {
			c.Close()
		}
		return say(err)
	case "kill":
		pid, _ := strconv.Atoi(args[1])
		return say(syscall.Kill(pid, syscall.SIGTERM))
	case "connect":
		c, err := net.DialTimeout("tcp", args[1], 2*time.Second)
		if err == nil {
			c.Close()
		}
		return say(err)
	case "get":
		// An HTTP GET, as an agent's model client makes it: the body.
		cl := http.Client{Timeout: 5 * time.Second}
		resp, err := cl.Get(args[1])
		if err != nil {
			return say(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s\n", resp.StatusCode, body)
		return 0
	case "sockets":
		// The sockets this agent holds: it must inherit none of the
		// launcher's (a gateway channel, a listener).
		es, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, e := range es {
			if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(l, "socket:") {
				n++
			}
		}
		fmt.Println(n, "sockets")
		return 0
	case "connect-mptcp":
		d := net.Dialer{Timeout: 2 * time.Second}
		d.SetMultipathTCP(true)
		c, err := d.Dial("tcp", args[1])
		if err == nil {
			c.Close()
		}
		return say(err)
	case "mptcp-socket":
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 262) // IPPROTO_MPTCP
		if err == nil {
			syscall.Close(fd)
		}
		return say(err)
	case "caps":
		b, _ := os.ReadFile("/proc/self/status")
		var caps []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "Cap") && !strings.HasPrefix(line, "CapBnd") {
				caps = append(caps, line)
			}
		}
		fmt.Println(strings.Join(caps, " "))
		return 0
	case "udp":
		c, err := net.Dial("udp", args[1])
		if err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
		return say(err)
	case "echo":
		io.Copy(os.Stdout, os.Stdin)
		fmt.Fprint(os.Stderr, "to-stderr")
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[1])
		return n
	case "env":
		fmt.Println(len(os.Getenv(args[1])), os.Getpid(), os.Getppid())
		return 0
	case "pids":
		// Which processes this agent can see.
		es, _ := os.ReadDir("/proc")
		var pids []string
		for _, e := range es {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, e.Name())
			}
		}
		fmt.Println(strings.Join(pids, " "))
		return 0
	case "daemons":
		// A setsid daemon, and a child that double-forks one more, then
		// either exit (args[1] == "exit") or wait.
		self, _ := os.Executable()
		for _, how := range []string{"setsid", "plain"} {
			cmd := exec.Command(self, "sandbox-agent", "sleep")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: how == "setsid"}
			if err := cmd.Start(); err != nil {
				fmt.Println("error:", err)
				return 1
			}
		}
		fmt.Println("started")
		if args[1] == "exit" {
			return 0
		}
		select {}
	case "sleep":
		// A daemon that only SIGKILL (or its PID namespace ending) stops.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Println("unknown op", args[0])
	return 2
}

func unixName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.ESRCH:
		return "ESRCH"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	case syscall.ENETUNREACH:
		return "ENETUNREACH"
	case syscall.EBUSY:
		return "EBUSY"
	}
	return fmt.Sprintf("errno %d (%v)", int(e), e)
}

// fixture is a sandbox's file tree: a HOME with a planted key, a cwd, a
// private tmp, and a directory outside all of them.
type fixture struct {
	root, home, cwd, tmp, outside string
	mark                          string // in every sandboxed process's environment
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{
		root:    root,
		home:    filepath.Join(root, "home"),
		cwd:     filepath.Join(root, "work"),
		tmp:     filepath.Join(root, "tmp"),
		outside: filepath.Join(root, "outside"),
	}
	for _, d := range []string{f.home + "/.ssh", f.home + "/.cargo", f.home + "/notes", f.cwd, f.tmp, f.outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{f.home + "/.ssh/id_rsa", f.home + "/.cargo/credentials.toml", f.home + "/notes/todo", f.outside + "/file"} {
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, 8)
	rand.Read(b)
	f.mark = hex.EncodeToString(b)
	return f
}

func (f fixture) spec() Spec {
	return Spec{Cwd: f.cwd, TmpDir: f.tmp, Home: f.home}
}

// result is how one sandboxed agent ended.
type result struct {
	stdout, stderr string
	exit           string
	child          *procgroup.Child
}

// run starts the agent op in spec's sandbox through procgroup, as the
// step runner will, feeds it stdin, and waits for it to exit.
func (f fixture) run(t *testing.T, spec Spec, stdin string, op ...string) result {
	t.Helper()
	c := f.start(t, spec, op...)
	go func() {
		io.WriteString(c.Stdin(), stdin)
		c.Stdin().Close()
	}()
	out, _ := io.ReadAll(c.Stdout())
	select {
	case <-c.Exited():
	case <-time.After(time.Minute): // a hang guard: it exits in well under a second idle
		t.Fatal("the sandboxed agent did not exit")
	}
	rep := c.Teardown(procgroup.Ladder{EOFGrace: time.Second, TermGrace: time.Second})
	f.assertNothingLeft(t)
	return result{stdout: strings.TrimSpace(string(out)), stderr: c.Stderr().String(), exit: rep.Exit, child: c}
}

func (f fixture) start(t *testing.T, spec Spec, op ...string) *procgroup.Child {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Command(self, []string{"sandbox-launch"}, spec, self, append([]string{"sandbox-agent"}, op...))
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Start(f.env(spec), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// env is the environment of an agent in spec's sandbox: the fixture's
// mark, and extra.
func (f fixture) env(spec Spec, extra ...string) []string {
	return append([]string{"PATH=/usr/bin:/bin", "HOME=" + spec.Home, "TMPDIR=" + spec.TmpDir, "SANDBOX_TEST_MARK=" + f.mark}, extra...)
}

// assertNothingLeft looks through the whole process table for anything
// that carries this fixture's mark.
func (f fixture) assertNothingLeft(t *testing.T) {
	t.Helper()
	// Up to half a minute (a hang guard): the group is dead when Teardown
	// returns, but a loaded machine may take a while to clear /proc of
	// what the launcher's own teardown killed.
	var live []string
	for range 3000 {
		live = f.marked()
		if len(live) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("still running after teardown: %s", strings.Join(live, "; "))
}

func (f fixture) marked() []string {
	es, _ := os.ReadDir("/proc")
	var live []string
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte("SANDBOX_TEST_MARK="+f.mark)) {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			continue // a zombie: dead, waiting for its reaper
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		live = append(live, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return live
}

func TestTheSandboxConfinesFiles(t *testing.T) {
	f := newFixture(t)
	extra := filepath.Join(f.root, "extra")
	os.Mkdir(extra, 0o700)
	linked := filepath.Join(f.root, "keys")
	os.Mkdir(linked, 0o700)
	os.WriteFile(filepath.Join(linked, "id_ed25519"), []byte("secret"), 0o600)
	os.Symlink(linked, filepath.Join(f.home, ".gnupg")) // a denied entry that is a symlink

	spec := f.spec()
	spec.Write = []string{extra}
	spec.Deny = []string{filepath.Join(f.home, "notes")}
	for _, c := range []struct {
		name string
		op   []string
		want string
	}{
		{"writing in cwd works", []string{"write", filepath.Join(f.cwd, "a")}, "ok"},
		{"writing in the private tmp works", []string{"write", filepath.Join(f.tmp, "a")}, "ok"},
		{"writing in an extra writable path works", []string{"write", filepath.Join(extra, "a")}, "ok"},
		{"writing beside cwd fails", []string{"write", filepath.Join(f.outside, "a")}, "EACCES"},
		{"overwriting a readable file fails", []string{"write", filepath.Join(f.outside, "file")}, "EACCES"},
		{"writing in /etc fails", []string{"write", "/etc/acpflow-sandbox-test"}, "EACCES"},
		{"writing in HOME fails", []string{"write", filepath.Join(f.home, "x")}, "EACCES"},
		{"reading a file beside cwd works", []string{"read", filepath.Join(f.outside, "file")}, "ok"},
		{"reading /etc/hostname works", []string{"read", "/etc/hostname"}, "ok"},
		{"reading ~/.ssh/id_rsa fails", []string{"read", filepath.Join(f.home, ".ssh/id_rsa")}, "EACCES"},
		{"reading a globbed deny entry fails", []string{"read", filepath.Join(f.home, ".cargo/credentials.toml")}, "EACCES"},
		{"reading a denied entry given in the spec fails", []string{"read", filepath.Join(f.home, "notes/todo")}, "EACCES"},
		{"reading through a denied symlink fails", []string{"read", filepath.Join(f.home, ".gnupg/id_ed25519")}, "EACCES"},
		{"reading a denied symlink's target fails", []string{"read", filepath.Join(linked, "id_ed25519")}, "EACCES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.run(t, spec, "", c.op...)
			if r.stdout != c.want {
				t.Errorf("got %q, want %q (stderr %q)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

func TestACwdThatHoldsADeniedEntryIsSplit(t *testing.T) {
	f := newFixture(t)
	spec := f.spec()
	spec.Cwd = f.home
	os.Mkdir(filepath.Join(f.home, "proj"), 0o700)
	for _, c := range []struct {
		name string
		op   []string
		want string
	}{
		{"writing below an entry of cwd works", []string{"write", filepath.Join(f.home, "proj/a")}, "ok"},
		{"reading ~/.ssh/id_rsa still fails", []string{"read", filepath.Join(f.home, ".ssh/id_rsa")}, "EACCES"},
		{"writing ~/.ssh/authorized_keys fails", []string{"write", filepath.Join(f.home, ".ssh/authorized_keys")}, "EACCES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := f.run(t, spec, "", c.op...); r.stdout != c.want {
				t.Errorf("got %q, want %q (stderr %q)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

func TestTheAgentSeesNoProcessOutsideItsSandbox(t *testing.T) {
	f := newFixture(t)
	me := strconv.Itoa(os.Getpid())
	t.Run("reading acpflow's /proc/PID/environ fails", func(t *testing.T) {
		if r := f.run(t, f.spec(), "", "read", "/proc/"+me+"/environ"); r.stdout != "ENOENT" {
			t.Errorf("got %q, want ENOENT", r.stdout)
		}
	})
	t.Run("signalling acpflow fails", func(t *testing.T) {
		if r := f.run(t, f.spec(), "", "kill", me); r.stdout != "ESRCH" {
			t.Errorf("got %q, want ESRCH", r.stdout)
		}
	})
	t.Run("its /proc lists only the launcher and itself", func(t *testing.T) {
		// Thread ids take pids too, so the agent's number varies.
		r := f.run(t, f.spec(), "", "pids")
		if pids := strings.Fields(r.stdout); len(pids) != 2 || pids[0] != "1" {
			t.Errorf("got %q, want pid 1 and the agent's", r.stdout)
		}
	})
}

func TestTheAgentHasNoCapabilities(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, f.spec(), "", "caps")
	fields := strings.Fields(r.stdout)
	for i := 0; i+1 < len(fields); i += 2 {
		if strings.Trim(fields[i+1], "0") != "" {
			t.Errorf("%s %s, want none", fields[i], fields[i+1])
		}
	}
	if len(fields) != 8 {
		t.Errorf("got %q", r.stdout)
	}
}

// serve listens at addr and closes every connection it accepts, until the
// test ends.
func serve(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

func TestTheNetworkModes(t *testing.T) {
	f := newFixture(t)
	listen := func() (net.Listener, string) {
		l := serve(t, "tcp4", "127.0.0.1:0")
		return l, l.Addr().String()
	}
	proxy, proxyAddr := listen()
	_, otherAddr := listen()
	port := proxy.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		name    string
		network Network
		op      []string
		want    string
	}{
		{"on: a connect to a local listener works", NetworkOn, []string{"connect", otherAddr}, "ok"},
		{"proxy: a connect to the proxy port works", NetworkProxy, []string{"connect", proxyAddr}, "ok"},
		{"proxy: a connect to another port fails", NetworkProxy, []string{"connect", otherAddr}, "EACCES"},
		{"proxy: an MPTCP connect to another port fails", NetworkProxy, []string{"connect-mptcp", otherAddr}, "EACCES"},
		{"proxy: an MPTCP socket cannot be created", NetworkProxy, []string{"mptcp-socket"}, "EACCES"},
		{"on: an MPTCP socket can be created", NetworkOn, []string{"mptcp-socket"}, "ok"},
		{"proxy: a UDP send fails", NetworkProxy, []string{"udp", otherAddr}, "EACCES"},
		{"on: a UDP send works", NetworkOn, []string{"udp", otherAddr}, "ok"},
		{"off: a connect to the proxy port fails", NetworkOff, []string{"connect", proxyAddr}, "ECONNREFUSED"},
		{"off: a connect to another port fails", NetworkOff, []string{"connect", otherAddr}, "ECONNREFUSED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := f.spec()
			spec.Network = c.network
			spec.ProxyPort = port
			if r := f.run(t, spec, "", c.op...); r.stdout != c.want {
				t.Errorf("got %q, want %q (stderr %q)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

func TestTheAgentsStdioAndExitCodePassThrough(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, f.spec(), "hello\n", "echo")
	if r.stdout != "hello" || r.stderr != "to-stderr" {
		t.Errorf("stdout %q, stderr %q; want hello, to-stderr", r.stdout, r.stderr)
	}
	if r := f.run(t, f.spec(), "", "exit", "7"); r.exit != "exit status 7" {
		t.Errorf("exit %q, want exit status 7", r.exit)
	}
}

func TestNothingOutlivesTheSandbox(t *testing.T) {
	f := newFixture(t)
	t.Run("daemons left by an agent that exits die with it", func(t *testing.T) {
		r := f.run(t, f.spec(), "", "daemons", "exit")
		if r.stdout != "started" {
			t.Fatalf("got %q (stderr %q)", r.stdout, r.stderr)
		}
	})
	for _, how := range []string{"teardown", "kill"} {
		t.Run("a "+how+" of the launcher's group ends the agent and its daemons", func(t *testing.T) {
			c := f.start(t, f.spec(), "daemons", "wait")
			buf := make([]byte, 8)
			if n, _ := io.ReadFull(c.Stdout(), buf[:8]); string(buf[:n]) != "started\n" {
				t.Fatalf("got %q (stderr %q)", buf[:n], c.Stderr().String())
			}
			// The launcher's environment is procgroup's marker alone.
			if got := len(f.marked()); got != 3 {
				t.Errorf("%d marked processes before teardown, want 3 (agent, 2 daemons)", got)
			}
			if how == "kill" {
				c.Kill()
			}
			rep := c.Teardown(procgroup.Ladder{EOFGrace: 10 * time.Millisecond, TermGrace: 100 * time.Millisecond})
			if rep.Err != nil {
				t.Error(rep.Err)
			}
			f.assertNothingLeft(t)
			if alive(c.Pid()) {
				t.Errorf("the launcher (pid %d) outlived its group's teardown", c.Pid())
			}
		})
	}
}

// alive says whether pid is a process that has not been reaped.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestCommandRefusesWhatItCannotEnforce(t *testing.T) {
	f := newFixture(t)
	bad := f.spec()
	bad.Network = NetworkProxy
	if _, err := Command("/bin/acpflow", nil, bad, "/bin/true", nil); err == nil || !strings.Contains(err.Error(), "proxy port") {
		t.Errorf("a proxy without a port: %v", err)
	}
	bad = f.spec()
	bad.Write = []string{filepath.Join(f.home, ".ssh")}
	if _, err := Command("/bin/acpflow", nil, bad, "/bin/true", nil); err == nil || !strings.Contains(err.Error(), "inside the denied") {
		t.Errorf("a writable path inside a denied one: %v", err)
	}
	r := Report{LandlockABI: 3, FS: true, UserNS: true, PIDNS: true, SocketFilter: true}
	spec := f.spec()
	spec.Network, spec.ProxyPort = NetworkProxy, 8080
	err := r.enforces(spec)
	if err == nil || !strings.Contains(err.Error(), "network proxy (Landlock ABI 3 has no TCP rules; 4 needed)") {
		t.Errorf("ABI 3 and proxy: %v", err)
	}
	if !errors.Is(err, errNotEnforceable) {
		t.Errorf("%v does not wrap errNotEnforceable", err)
	}
}

func TestProbeFindsWhatThisKernelHas(t *testing.T) {
	r := Probe()
	t.Logf("%+v", r)
	if r.LandlockABI < 6 || !r.FS || !r.Net || !r.Scopes || !r.UserNS || !r.PIDNS || !r.NetNS {
		t.Skipf("this machine lacks part of the sandbox: %v", r.Problems)
	}
}

// BenchmarkSpawn compares starting /bin/true through procgroup with and
// without the sandbox, until it has exited and been torn down. Besides
// wall time it reports child-cpu-ns/op, the CPU the children used (the
// launcher and the agent, as getrusage counts reaped children), which a
// loaded machine does not inflate as it does wall time.
func BenchmarkSpawn(b *testing.B) {
	root := b.TempDir()
	home := filepath.Join(root, "home")
	cwd := filepath.Join(root, "work")
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{home + "/.ssh", cwd, tmp} {
		os.MkdirAll(d, 0o700)
	}
	self, _ := os.Executable()
	wait := func(b *testing.B, c *procgroup.Child) {
		io.Copy(io.Discard, c.Stdout())
		<-c.Exited()
		if rep := c.Teardown(procgroup.Ladder{EOFGrace: time.Second, TermGrace: time.Second}); rep.Exit != "exit status 0" {
			b.Fatalf("%s: %s", rep.Exit, c.Stderr().String())
		}
	}
	spawn := func(b *testing.B, ps procgroup.Spec) {
		c, err := procgroup.Start(ps)
		if err != nil {
			b.Fatal(err)
		}
		wait(b, c)
	}
	b.Run("plain", func(b *testing.B) {
		defer childCPU(b)()
		for b.Loop() {
			spawn(b, procgroup.Spec{Path: "/bin/true", Dir: cwd})
		}
	})
	// A plain spawn after the pause the sandboxed ones below take: a
	// machine that has idled runs the next spawn slower (caches, a halted
	// virtual CPU), whatever the spawn.
	b.Run("plain-after-pause", func(b *testing.B) {
		defer childCPU(b)()
		for b.Loop() {
			b.StopTimer()
			pause()
			b.StartTimer()
			spawn(b, procgroup.Spec{Path: "/bin/true", Dir: cwd})
		}
	})
	// The floor under any sandbox: /bin/true started straight into the
	// launcher's new namespaces, with no launcher and no rules.
	b.Run("namespaces-only", func(b *testing.B) {
		l, err := Command(self, []string{"sandbox-launch"}, Spec{Cwd: cwd, TmpDir: tmp, Home: home}, "/bin/true", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer childCPU(b)()
		for b.Loop() {
			spawn(b, procgroup.Spec{Path: "/bin/true", Dir: cwd,
				Cloneflags: l.Cloneflags, UidMappings: l.UidMappings, GidMappings: l.GidMappings, AmbientCaps: l.AmbientCaps})
		}
	})
	// ACPFLOW_BENCH_LAUNCHER names an acpflow binary to launch through, as
	// a step does: the dedicated launcher beside it when one is installed
	// there (go build -o /tmp/bin/ ./cmd/acpflow ./cmd/acpflow-sandbox),
	// else the binary itself (its start, package initialisation included,
	// is then what a sandboxed spawn pays).
	launcher, launcherArgs := self, []string{"sandbox-launch"}
	if l := os.Getenv("ACPFLOW_BENCH_LAUNCHER"); l != "" {
		launcher, launcherArgs = Launcher(l, []string{"sandbox-exec"})
		b.Logf("launcher: %s %q", launcher, launcherArgs)
	}
	start := func(b *testing.B, spec Spec) {
		l, err := Command(launcher, launcherArgs, spec, "/bin/true", nil)
		if err != nil {
			b.Fatal(err)
		}
		if spec.Network == NetworkGateway {
			// The listener is handed over before the agent starts: its
			// cost is in the spawn's.
			c, ln, err := l.StartGateway(nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			wait(b, c)
			ln.Close()
			return
		}
		c, err := l.Start(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		wait(b, c)
	}
	// What a step pays: the launcher started ahead after the step before
	// serves it. Off the clock, the loop waits for that launcher and then
	// pauses, as a step's agent runs far longer than a launcher takes to
	// start: compare with plain-after-pause. The launcher's CPU is in
	// child-cpu.
	for _, network := range []Network{NetworkOn, NetworkProxy, NetworkOff, NetworkGateway} {
		b.Run("sandboxed/network="+string(network), func(b *testing.B) {
			spec := Spec{Cwd: cwd, TmpDir: tmp, Home: home, Network: network, ProxyPort: 3128, GatewayPort: 8443}
			l, _ := Command(launcher, launcherArgs, spec, "/bin/true", nil)
			DismissWaiting()
			start(b, spec) // the step before, off the clock
			defer childCPU(b)()
			for b.Loop() {
				b.StopTimer()
				for !launcherWaiting(l) {
					time.Sleep(time.Millisecond)
				}
				pause()
				b.StartTimer()
				start(b, spec)
			}
		})
	}
	// Setup alone, what a step waits for before its agent runs: from the
	// spawn until the agent's first byte on stdout (/bin/echo's), with
	// its exit and teardown off the clock. The cycles above count, on top
	// of it, what the exit costs: a sandboxed agent's launcher and
	// namespaces are torn down before acpflow sees the process gone.
	echo := []string{"ready"}
	timeSetup := func(b *testing.B, ready func(), start func() (*procgroup.Child, error)) {
		for b.Loop() {
			b.StopTimer()
			ready()
			b.StartTimer()
			c, err := start()
			if err != nil {
				b.Fatal(err)
			}
			firstByte(b, c)
			b.StopTimer()
			wait(b, c)
			b.StartTimer()
		}
	}
	b.Run("setup/plain", func(b *testing.B) {
		timeSetup(b, pause, func() (*procgroup.Child, error) {
			return procgroup.Start(procgroup.Spec{Path: "/bin/echo", Args: echo, Dir: cwd})
		})
	})
	b.Run("setup/sandboxed", func(b *testing.B) {
		spec := Spec{Cwd: cwd, TmpDir: tmp, Home: home}
		l, _ := Command(launcher, launcherArgs, spec, "/bin/echo", echo)
		DismissWaiting()
		start(b, spec)
		ready := func() {
			for !launcherWaiting(l) {
				time.Sleep(time.Millisecond)
			}
			pause()
		}
		timeSetup(b, ready, func() (*procgroup.Child, error) {
			l, err := Command(launcher, launcherArgs, spec, "/bin/echo", echo)
			if err != nil {
				return nil, err
			}
			return l.Start(nil, nil)
		})
	})
	// What the first sandboxed step of a process pays: nothing started
	// ahead.
	b.Run("sandboxed-first/network=on", func(b *testing.B) {
		spec := Spec{Cwd: cwd, TmpDir: tmp, Home: home}
		defer childCPU(b)()
		for b.Loop() {
			b.StopTimer()
			DismissWaiting()
			b.StartTimer()
			start(b, spec)
		}
	})
	DismissWaiting()
}

// firstByte waits for the first byte c writes on stdout: the agent runs.
func firstByte(b *testing.B, c *procgroup.Child) {
	if _, err := io.ReadFull(c.Stdout(), make([]byte, 1)); err != nil {
		b.Fatalf("no output: %v; %s", err, c.Stderr().String())
	}
}

// pause is the time a step's agent would run between two spawns, long
// enough for a launcher started ahead to be ready (it takes about 60 ms).
func pause() { time.Sleep(200 * time.Millisecond) }

// launcherWaiting says whether a launcher started ahead waits for l.
func launcherWaiting(l Launch) bool {
	waiting.mu.Lock()
	defer waiting.mu.Unlock()
	return waiting.idle[l.key()] != nil
}

// childCPU starts counting the CPU time of reaped children; the function
// it returns reports it per op.
func childCPU(b *testing.B) func() {
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	return func() {
		var after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "child-cpu-ns/op")
	}
}

// Denied is what a step's result records as unreadable. Input class: a
// preset's state dirs, which lift the default entries inside them (an
// agent reads its own credentials) and only those; and deny: entries,
// exact and glob, which are added.
func TestDeniedIsWhatTheRulesKeepUnread(t *testing.T) {
	f := newFixture(t)
	spec := f.spec()
	spec.StateDirs = []string{filepath.Join(f.home, ".claude"), filepath.Join(f.home, ".claude.json")}
	spec.Deny = []string{filepath.Join(f.home, "notes"), filepath.Join(f.cwd, "keys", "*.pem")}
	got := spec.Denied()
	for _, want := range []string{
		filepath.Join(f.home, ".ssh"),
		filepath.Join(f.home, ".codex", "auth.json"),
		filepath.Join(f.home, ".cargo", "credentials*"),
		filepath.Join(f.home, "notes"),
		filepath.Join(f.cwd, "keys", "*.pem"),
	} {
		if !slices.Contains(got, want) {
			t.Errorf("Denied lacks %s: %v", want, got)
		}
	}
	if own := filepath.Join(f.home, ".claude", ".credentials.json"); slices.Contains(got, own) {
		t.Errorf("Denied keeps the agent's own %s: %v", own, got)
	}
	if n := len(DefaultDeny) - 1 + len(spec.Deny); len(got) != n {
		t.Errorf("Denied has %d entries, want %d: %v", len(got), n, got)
	}
}
