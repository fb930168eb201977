package sandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// auditHelperEnv makes the test binary, run as TestLandlockAuditHelper,
// a process that restricts itself as the launcher does (with the logging
// flag the launcher needs) and executes the shell script the variable
// holds, its denials going to the audit log.
const auditHelperEnv = "ACPFLOW_TEST_AUDIT_HELPER"

// TestTheWatchCountsWhatLandlockRefusedTheLaunchersProcessesOnly runs two
// Landlock-confined processes at once, each executing a shell that is
// refused a read (twice), a connect and a signal, and watches the one;
// what the watch reports is the one's refusals, counted, and none of the
// other's. It needs what reading the audit log needs (WatchDenials): as
// root on the host with audit on. With audit off it skips, unless
// ACPFLOW_TEST_AUDIT=on allows it to turn audit on for its duration.
func TestTheWatchCountsWhatLandlockRefusedTheLaunchersProcessesOnly(t *testing.T) {
	if Probe().LandlockABI < 7 {
		t.Skip("Landlock ABI < 7 logs no denials")
	}
	if err := auditOn(); err != nil {
		if os.Getenv("ACPFLOW_TEST_AUDIT") != "on" || os.Geteuid() != 0 {
			t.Skipf("the audit log cannot be read here: %v", err)
		}
		setAudit(t, 1)
		t.Cleanup(func() { setAudit(t, 0) })
	}
	w, err := openWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours.key"), filepath.Join(dir, "theirs.key")
	os.WriteFile(ours, []byte("k"), 0o600)
	os.WriteFile(theirs, []byte("k"), 0o600)
	sleeper := exec.Command("/bin/sleep", "60") // what the shells try to signal
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	script := func(key string) string {
		return fmt.Sprintf("%[1]s sandbox-agent read %[2]s; %[1]s sandbox-agent read %[2]s; %[1]s sandbox-agent connect %[3]s; %[1]s sandbox-agent kill %[4]d",
			os.Args[0], key, ln.Addr(), sleeper.Process.Pid)
	}
	bystander := startAuditHelper(t, script(theirs))
	spawn := startAuditHelper(t, script(ours))
	w.Attach(spawn.Process.Pid)
	for _, c := range []*exec.Cmd{spawn, bystander} {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v\n%s", err, c.Stdout)
		}
	}
	got := w.Denials()
	t.Logf("denials: %+v", got)
	for _, want := range []Denial{
		{Op: "read", Path: ours, Count: 2},
		{Op: "connect", Address: ln.Addr().String(), Count: 1},
		{Op: "kill", Process: fmt.Sprintf("sleep (pid %d)", sleeper.Process.Pid), Count: 1},
	} {
		if !slices.Contains(got.Kinds, want) {
			t.Errorf("the watch lacks %+v", want)
		}
	}
	for _, d := range got.Kinds {
		if d.Path == theirs {
			t.Errorf("the watch counted the other sandbox's %+v", d)
		}
	}
}

// startAuditHelper starts the test binary as a confined process running
// script; the caller waits for it.
func startAuditHelper(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^TestLandlockAuditHelper$")
	c.Env = append(os.Environ(), auditHelperEnv+"="+script)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLandlockAuditHelper is the confined process of the test above, not
// a test: without its variable it does nothing.
func TestLandlockAuditHelper(t *testing.T) {
	script := os.Getenv(auditHelperEnv)
	if script == "" {
		return
	}
	runtime.LockOSThread()
	self, _ := filepath.Abs(os.Args[0])
	rs, err := newRuleset(true) // TCP handled, no port allowed
	if err != nil {
		fmt.Println("ruleset:", err)
		os.Exit(3)
	}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"} {
		rs.allowPath(d, readRights)
	}
	rs.allowPath(self, readRights&fileRights)
	rs.allowPath("/dev/null", fileRights)
	// restrictSelf asks for the denials of what it execs to be logged.
	if err := rs.restrictSelf(); err != nil {
		fmt.Println("restrict:", err)
		os.Exit(3)
	}
	err = syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ())
	fmt.Println("exec:", err)
	os.Exit(3)
}

// setAudit turns the kernel's audit on (1) or off (0), for a test that was
// allowed to.
func setAudit(t *testing.T, enabled uint32) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	msg := make([]byte, unix.SizeofNlMsghdr+4*11)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], 1001) // AUDIT_SET
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[unix.SizeofNlMsghdr:], 1) // mask: AUDIT_STATUS_ENABLED
	binary.NativeEndian.PutUint32(msg[unix.SizeofNlMsghdr+4:], enabled)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
}
