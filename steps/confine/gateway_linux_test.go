package confine

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps"
)

// The test binary is the launcher (acpflow's hidden Subcommand) and a
// model-calling agent, so the sandbox and the gateway are the real ones.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case Subcommand:
			os.Exit(sandbox.Main(os.Args[2:]))
		case "model-agent":
			os.Exit(modelAgent(os.Args[2:]))
		}
	}
	if err := procgroup.EnableSubreaper(); err != nil {
		panic(err)
	}
	code := m.Run()
	sandbox.DismissWaiting()
	os.Exit(code)
}

// modelAgent calls the model as an Anthropic client does, from
// ANTHROPIC_BASE_URL with ANTHROPIC_API_KEY, and prints the status and
// answer; then it tries each of args (a host:port or a unix socket path)
// and prints "ok" or the errno of its failure, a line each.
func modelAgent(args []string) int {
	req, _ := http.NewRequest("POST", os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`))
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	cl := http.Client{Timeout: 10 * time.Second}
	if resp, err := cl.Do(req); err != nil {
		fmt.Println("model:", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	for _, a := range args {
		network := "tcp"
		if strings.HasPrefix(a, "/") {
			network = "unix"
		}
		c, err := net.DialTimeout(network, a, 2*time.Second)
		var errno syscall.Errno
		switch {
		case err == nil:
			c.Close()
			fmt.Println("ok")
		case errors.As(err, &errno):
			fmt.Println(int(errno))
		default:
			fmt.Println(err)
		}
	}
	return 0
}

// A sandboxed process with network: gateway calls its step's gateway at
// the URL the gateway gives (the host's, unchanged), and the answer is
// the provider's, which got the key; a loopback port outside, an outside
// address and a unix socket outside are refused. The record says
// gateway, and nothing is left once the group is torn down and the
// confinement released.
func TestNetworkGatewayReachesTheStepsGatewayOnly(t *testing.T) {
	if p := sandbox.Probe(); !p.NetNS || !p.FS || !p.SocketFilter {
		t.Skipf("this machine cannot enforce network gateway: %v", p.Problems)
	}
	const key = "sk-ant-canary-0123456789"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			w.WriteHeader(401)
			return
		}
		io.WriteString(w, `{"type":"message","model":"claude-sonnet-4-5","usage":{"input_tokens":11,"output_tokens":4}}`)
	}))
	defer provider.Close()
	placeholder := gateway.NewPlaceholder()
	g, err := gateway.Start(gateway.Config{Provider: "anthropic", Upstream: provider.URL, Key: key, Placeholder: placeholder, Client: provider.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	outside := httptest.NewServer(http.NotFoundHandler())
	defer outside.Close()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()

	ws, home := t.TempDir(), t.TempDir()
	self, _ := os.Executable()
	r := Request{Who: "agent test", Sandbox: &steps.Sandbox{Network: steps.NetworkGateway}, Cwd: ws, Workspace: ws, Home: home, Self: self, Gateway: g}
	mark := "CONFINE_TEST_MARK=" + rand.Text()
	env := map[string]string{"HOME": home, "ANTHROPIC_BASE_URL": g.URL(), "ANTHROPIC_API_KEY": placeholder}
	args := []string{"model-agent", strings.TrimPrefix(outside.URL, "http://"), "192.0.2.1:443", sock}
	c, rec, err := Wrap(r, env, self, args, func(steps.EventData) {})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Network != steps.NetworkGateway || !rec.Enforced {
		t.Errorf("record %+v, want an enforced network gateway", rec)
	}
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	child, err := c.Start(procgroup.Spec{Env: append(list, mark)})
	if err != nil {
		t.Fatal(err)
	}
	child.Stdin().Close()
	out, _ := io.ReadAll(child.Stdout())
	rep := child.Teardown(procgroup.Ladder{EOFGrace: time.Minute, TermGrace: time.Second})
	c.Release()
	if rep.Exit != "exit status 0" {
		t.Fatalf("%s: %s", rep.Exit, child.Stderr().String())
	}
	want := fmt.Sprintf("200 %s\n%d\n%d\n%d\n", `{"type":"message","model":"claude-sonnet-4-5","usage":{"input_tokens":11,"output_tokens":4}}`,
		syscall.ECONNREFUSED, syscall.ENETUNREACH, syscall.EACCES)
	if string(out) != want {
		t.Errorf("the agent printed\n%s\nwant\n%s", out, want)
	}
	g.Close()
	if u := g.Usage()["claude-sonnet-4-5"]; u.Input != 11 || u.Output != 4 {
		t.Errorf("the gateway metered %+v, want 11 in, 4 out", u)
	}
	assertNoneMarked(t, mark)
}

// A process without a gateway cannot have network: gateway: nothing is
// started, and the error says why and what to use instead.
func TestNetworkGatewayWithoutAGatewayIsRefused(t *testing.T) {
	ws := t.TempDir()
	r := Request{Who: "step build", Sandbox: &steps.Sandbox{Network: steps.NetworkGateway}, Cwd: ws, Workspace: ws, Home: t.TempDir()}
	env := map[string]string{}
	c, _, err := Wrap(r, env, "/bin/true", nil, func(steps.EventData) {})
	if c != nil || !errors.Is(err, ErrNoGateway) || !strings.HasPrefix(err.Error(), "step build: sandbox: network: gateway") {
		t.Fatalf("Wrap: %v, %v; want ErrNoGateway naming the step", c, err)
	}
	if env["TMPDIR"] != "" {
		t.Error("a refused sandbox set TMPDIR")
	}
}

// assertNoneMarked fails when a live process carries mark in its
// environment (a hang guard of ten seconds for /proc to clear).
func assertNoneMarked(t *testing.T, mark string) {
	t.Helper()
	for range 1000 {
		live := ""
		es, _ := os.ReadDir("/proc")
		for _, e := range es {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			b, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if bytes.Contains(b, []byte(mark)) && !bytes.Contains(stat, []byte(") Z")) {
				live += " " + e.Name()
			}
		}
		if live == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("processes still running after teardown")
}
