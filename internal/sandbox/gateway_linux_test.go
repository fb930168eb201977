package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// hostGateway stands for the step's gateway on acpflow's side: an HTTP
// server on a host loopback port (whose number the agent's listener
// takes), answering "gateway" and counting what it served.
type hostGateway struct {
	srv    *http.Server
	port   int
	served chan string
}

func newHostGateway(t *testing.T) *hostGateway {
	t.Helper()
	ln := serveHTTP(t, nil)
	g := &hostGateway{port: ln.Addr().(*net.TCPAddr).Port, served: make(chan string, 16)}
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.served <- r.URL.Path
		io.WriteString(w, "gateway")
	})}
	go g.srv.Serve(ln)
	t.Cleanup(func() { g.srv.Close() })
	return g
}

// serveHTTP listens on a free host loopback port, closed at the test's
// end; nil handler: nothing is served on it yet.
func serveHTTP(t *testing.T, h http.Handler) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if h != nil {
		go http.Serve(ln, h)
	}
	return ln
}

// startGateway starts the agent op in spec's sandbox with network
// "gateway" and serves g on the listener its launcher hands back.
func (f fixture) startGateway(t *testing.T, spec Spec, g *hostGateway, op ...string) (*procgroup.Child, net.Listener) {
	t.Helper()
	spec.Network, spec.GatewayPort = NetworkGateway, g.port
	c, file, err := agentFor(t, spec, op...).StartGateway(f.env(spec), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	go g.srv.Serve(ln)
	return c, ln
}

// The agent reaches its gateway at 127.0.0.1:PORT, served by acpflow on
// the listener its launcher made; nothing else: not another loopback port
// outside, not an outside address, not a unix socket outside. Each
// refusal is a plain errno.
func TestANetworkGatewayAgentReachesItsGatewayAndNothingElse(t *testing.T) {
	f := newFixture(t)
	g := newHostGateway(t)
	other := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "outside") }))
	sock := filepath.Join(f.outside, "agent.sock")
	serve(t, "unix", sock)
	gatewayURL := fmt.Sprintf("http://127.0.0.1:%d/v1/messages", g.port)
	for _, c := range []struct {
		name string
		op   []string
		want string
	}{
		{"the gateway's port answers with the gateway", []string{"get", gatewayURL}, "200 gateway"},
		{"another loopback port outside is refused", []string{"connect", other.Addr().String()}, "ECONNREFUSED"},
		{"an outside address is unreachable", []string{"connect", "192.0.2.1:443"}, "ENETUNREACH"},
		{"a unix socket outside is refused", []string{"unix", sock}, "EACCES"},
		{"the agent holds none of the launcher's sockets", []string{"sockets"}, "0 sockets"},
		{"the gateway's port on ::1 is refused", []string{"connect", fmt.Sprintf("[::1]:%d", g.port)}, "ECONNREFUSED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			child, _ := f.startGateway(t, f.spec(), g, c.op...)
			if got := finish(t, child); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			f.assertNothingLeft(t)
		})
	}
	select {
	case p := <-g.served:
		if p != "/v1/messages" {
			t.Errorf("the gateway served %q", p)
		}
	default:
		t.Error("the gateway served nothing")
	}
}

// A launcher started ahead for network "gateway" serves the next gateway
// agent, its listener included, and no other kind of launch: one for
// network "off" (the same namespaces, no gateway channel) starts its own.
func TestALauncherStartedAheadHandsOverItsGatewayListenerToo(t *testing.T) {
	f := newFixture(t)
	DismissWaiting()
	t.Cleanup(DismissWaiting)
	g := newHostGateway(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", g.port)
	spec := f.spec()
	spec.Network, spec.GatewayPort = NetworkGateway, g.port
	first, _ := f.startGateway(t, f.spec(), g, "get", url)
	if got := finish(t, first); got != "200 gateway" {
		t.Fatalf("the first agent got %q", got)
	}
	ahead := waitingFor(t, agentFor(t, spec, "get", url))
	off := f.spec()
	off.Network = NetworkOff
	if c := mustStart(t, agentFor(t, off, "connect", "127.0.0.1:"+strconv.Itoa(g.port)), f.env(off)); c.Pid() == ahead.child.Pid() {
		t.Error("a network off agent took the launcher started ahead for network gateway")
	} else if got := finish(t, c); got != "ECONNREFUSED" {
		t.Errorf("a network off agent's connect to the gateway port: %q", got)
	}
	second, _ := f.startGateway(t, f.spec(), g, "get", url)
	if second.Pid() != ahead.child.Pid() {
		t.Errorf("the second gateway agent ran under launcher %d, not the one started ahead (%d)", second.Pid(), ahead.child.Pid())
	}
	if got := finish(t, second); got != "200 gateway" {
		t.Errorf("the agent of the launcher started ahead got %q", got)
	}
	f.assertNothingLeft(t)
}

// Start refuses a gateway spec (its listener would be lost) and
// StartGateway any other; Command a gateway without its port; and a
// launcher that fails before it hands the listener over is an error that
// quotes it, with nothing left running.
func TestAGatewayLaunchIsStartedOnlyWithItsListener(t *testing.T) {
	f := newFixture(t)
	spec := f.spec()
	spec.Network = NetworkGateway
	if _, err := Command("/bin/acpflow", nil, spec, "/bin/true", nil); err == nil || !strings.Contains(err.Error(), "gateway port") {
		t.Errorf("a gateway without a port: %v", err)
	}
	spec.GatewayPort = 9
	if _, err := agentFor(t, spec, "exit", "0").Start(f.env(spec), nil); err == nil || !strings.Contains(err.Error(), "StartGateway") {
		t.Errorf("Start of a gateway spec: %v", err)
	}
	if _, _, err := agentFor(t, f.spec(), "exit", "0").StartGateway(f.env(spec), nil); err == nil || !strings.Contains(err.Error(), "no gateway") {
		t.Errorf("StartGateway of a network on spec: %v", err)
	}
	// A launcher that gives up before it listens, as one from another
	// build would.
	broken, err := Command("/bin/sh", []string{"-c", "echo 'acpflow sandbox: broken' >&2; exit 125"}, spec, "/bin/true", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = broken.StartGateway(f.env(spec), nil)
	if err == nil || !strings.Contains(err.Error(), "did not hand over the gateway's listener") || !strings.Contains(err.Error(), "acpflow sandbox:") {
		t.Errorf("a launcher that failed: %v", err)
	} else {
		t.Log(err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the failed launcher took %v to be noticed", time.Since(start))
	}
	f.assertNothingLeft(t)
}
