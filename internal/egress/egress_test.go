package egress

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every address these tests dial is on loopback: the proxy, and servers
// the tests start on 127.0.0.1. A refused request names other hosts, but a
// refusal dials nothing.

// attempts collects what a proxy records.
type attempts struct {
	mu   sync.Mutex
	list []Attempt
}

func (a *attempts) record(at Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, at)
}

func (a *attempts) all() []Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Attempt(nil), a.list...)
}

func (a *attempts) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = nil
}

// only returns the one attempt recorded, failing the test otherwise.
func (a *attempts) only(t *testing.T) Attempt {
	t.Helper()
	all := a.all()
	if len(all) != 1 {
		t.Fatalf("recorded %d attempts, want 1: %+v", len(all), all)
	}
	return all[0]
}

func startProxy(t *testing.T, allow []string, lim limits) (*Proxy, *attempts) {
	t.Helper()
	rec := &attempts{}
	p, err := start(allow, rec.record, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, rec
}

// echoServer is a TCP server on loopback that echoes each connection and
// closes it when the client is done sending. It counts connections.
type echoServer struct {
	ln       net.Listener
	port     int
	mu       sync.Mutex
	accepted int
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.accepted++
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *echoServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *echoServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

func (s *echoServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// connect sends CONNECT target to the proxy and returns the connection,
// a reader positioned after the response, and the response's status.
func connect(t *testing.T, p *Proxy, target string, early []byte) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
	if _, err := c.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return c, br, resp.StatusCode
}

func TestConnectToAListedHostTunnelsBytesBothWays(t *testing.T) {
	echo := startEcho(t)
	p, rec := startProxy(t, []string{echo.addr()}, defaultLimits)

	// Bytes sent with the CONNECT, before its answer, as a TLS client
	// sends its ClientHello, must not be lost.
	c, br, status := connect(t, p, echo.addr(), []byte("early "))
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200", status)
	}
	payload := make([]byte, 4<<20)
	rand.Read(payload)
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("early "), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("echoed %d bytes, want the %d sent", len(got), len(want))
	}

	at := rec.only(t)
	if at.Host != "127.0.0.1" || at.Port != echo.port || at.Method != "CONNECT" || !at.Allowed ||
		at.Status != http.StatusOK || at.Reason != "" || at.Time.IsZero() {
		t.Errorf("recorded %+v", at)
	}
}

func TestConnectToAnUnlistedHostIsRefusedAndRecorded(t *testing.T) {
	echo := startEcho(t)
	p, rec := startProxy(t, []string{echo.addr()}, defaultLimits)

	cases := []struct {
		name   string
		target string
		host   string
	}{
		{"another name", "api.example.com:443", "api.example.com"},
		{"a name for the listed address", "localhost:" + strconv.Itoa(echo.port), "localhost"},
		{"another loopback address", "127.0.0.2:" + strconv.Itoa(echo.port), "127.0.0.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.reset()
			conn, br, status := connect(t, p, c.target, nil)
			if status != http.StatusForbidden {
				t.Fatalf("status %d, want 403", status)
			}
			at := rec.only(t)
			if at.Host != c.host || at.Allowed || at.Status != http.StatusForbidden ||
				at.Reason != "host is not in the allow list" || at.Method != "CONNECT" {
				t.Errorf("recorded %+v", at)
			}
			// The connection stays usable: a listed host next.
			fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", echo.addr())
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("then CONNECT to a listed host: %v %v", resp, err)
			}
		})
	}
	// A connection is dialed before the server's Accept returns it.
	eventually(t, func() bool { return echo.count() == len(cases) }, func() string {
		return fmt.Sprintf("the listed server saw %d connections, want %d (one per allowed CONNECT)", echo.count(), len(cases))
	})
}

func TestAListedHostWithAnotherPort(t *testing.T) {
	listed, other := startEcho(t), startEcho(t)
	cases := []struct {
		name  string
		allow []string
		want  int
	}{
		{"is refused when the entry names a port", []string{listed.addr()}, http.StatusForbidden},
		{"is allowed when the entry names none", []string{"127.0.0.1"}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, rec := startProxy(t, c.allow, defaultLimits)
			_, _, status := connect(t, p, other.addr(), nil)
			if status != c.want {
				t.Fatalf("status %d, want %d", status, c.want)
			}
			at := rec.only(t)
			if at.Allowed != (c.want == http.StatusOK) {
				t.Errorf("recorded %+v", at)
			}
			if c.want == http.StatusForbidden && at.Reason != "port "+strconv.Itoa(other.port)+" is not in the allow list for this host" {
				t.Errorf("reason %q", at.Reason)
			}
		})
	}
}

// proxiedClient sends every request through p, whatever the environment
// says, and keeps no connection idle.
func proxiedClient(p *Proxy) *http.Client {
	u, _ := url.Parse(p.URL())
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}}
}

func TestPlainHTTPThroughTheProxy(t *testing.T) {
	type seen struct {
		uri, host, proxyAuth, connection string
	}
	var mu sync.Mutex
	var got []seen
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.RequestURI, r.Host, r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Hop")})
		mu.Unlock()
		w.Header().Set("X-Answer", "42")
		io.WriteString(w, "hello from "+r.URL.Path)
	})
	listed, unlisted := httptest.NewServer(handler), httptest.NewServer(handler)
	defer listed.Close()
	defer unlisted.Close()
	listedURL, _ := url.Parse(listed.URL)
	p, rec := startProxy(t, []string{listedURL.Host}, defaultLimits)
	client := proxiedClient(p)

	t.Run("to a listed server works", func(t *testing.T) {
		req, _ := http.NewRequest("GET", listed.URL+"/v1/things?token=s3cret", nil)
		req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "for the proxy only")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello from /v1/things" || resp.Header.Get("X-Answer") != "42" {
			t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
		}
		mu.Lock()
		s := got[len(got)-1]
		mu.Unlock()
		if s.uri != "/v1/things?token=s3cret" || s.host != listedURL.Host {
			t.Errorf("the server saw %+v", s)
		}
		if s.proxyAuth != "" || s.connection != "" {
			t.Errorf("headers for the proxy reached the server: %+v", s)
		}
		at := rec.only(t)
		port, _ := strconv.Atoi(listedURL.Port())
		if at.Host != "127.0.0.1" || at.Port != port || at.Method != "GET" || !at.Allowed || at.Status != 200 {
			t.Errorf("recorded %+v", at)
		}
		if strings.Contains(fmt.Sprintf("%+v", rec.all()), "s3cret") {
			t.Errorf("the record holds the query: %+v", rec.all())
		}
	})

	t.Run("to an unlisted server gets 403", func(t *testing.T) {
		rec.reset()
		mu.Lock()
		before := len(got)
		mu.Unlock()
		resp, err := client.Post(unlisted.URL+"/upload", "text/plain", strings.NewReader("data"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "is not in the allow list") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		mu.Lock()
		after := len(got)
		mu.Unlock()
		if after != before {
			t.Error("the unlisted server was reached")
		}
		at := rec.only(t)
		if at.Method != "POST" || at.Allowed || at.Status != http.StatusForbidden {
			t.Errorf("recorded %+v", at)
		}
	})
}

func TestPlainHTTPStreamsTheResponse(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	defer srv.Close()
	defer close(release)
	u, _ := url.Parse(srv.URL)
	p, _ := startProxy(t, []string{u.Host}, defaultLimits)

	resp, err := proxiedClient(p).Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
}

// rawExchange sends raw bytes to the proxy and returns its answer's status.
func rawExchange(t *testing.T, p *Proxy, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRequestsThatAreNotForAProxy(t *testing.T) {
	p, rec := startProxy(t, []string{"127.0.0.1"}, defaultLimits)
	cases := []struct {
		name     string
		raw      string
		want     int
		recorded bool
	}{
		{"a request without an absolute URI gets 400", "GET /path HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, true},
		{"a CONNECT without a port gets 400", "CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, true},
		{"a CONNECT with a port out of range gets 400", "CONNECT 127.0.0.1:99999 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, true},
		{"a CONNECT with a named port gets 400", "CONNECT 127.0.0.1:https HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, false},
		{"an https URI gets 400", "GET https://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, true},
		{"an ftp URI gets 400", "GET ftp://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, true},
		{"a request that is not HTTP gets 400", "HELLO\r\n\r\n", 400, false},
		{"headers over 64 KiB get 431", "GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.reset()
			if got := rawExchange(t, p, c.raw); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
			all := rec.all()
			if !c.recorded {
				if len(all) != 0 {
					t.Fatalf("recorded %+v", all)
				}
				return
			}
			if len(all) != 1 || all[0].Allowed || all[0].Status != c.want || all[0].Reason == "" {
				t.Fatalf("recorded %+v", all)
			}
		})
	}
}

func TestSlowRequestHeadersAreCutOff(t *testing.T) {
	lim := defaultLimits
	lim.headerTimeout = 200 * time.Millisecond
	p, _ := startProxy(t, nil, lim)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n") // and never the rest
	// Who ended the connection, not when: the proxy's cut (EOF or a
	// reset) or, had it kept the connection open, this side's own minute.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection stayed open for a minute: the slow headers were not cut off")
	}
}

func TestAFailedDialIsA502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, rec := startProxy(t, []string{addr}, defaultLimits)
	_, _, status := connect(t, p, addr, nil)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", status)
	}
	at := rec.only(t)
	if !at.Allowed || at.Status != 502 || !strings.Contains(at.Reason, "connection refused") || strings.Contains(at.Reason, addr) {
		t.Errorf("recorded %+v", at)
	}
}

func TestATunnelWhoseClientLeftEndsAfterTheLinger(t *testing.T) {
	// A host that accepts and then neither sends nor closes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c
		}
	}()
	lim := defaultLimits
	lim.linger = 100 * time.Millisecond
	p, _ := startProxy(t, []string{ln.Addr().String()}, lim)
	c, br, status := connect(t, p, ln.Addr().String(), nil)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	up := <-held
	defer up.Close()

	c.(*net.TCPConn).CloseWrite()
	// The host reads EOF: the client's close is passed on.
	up.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := up.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the host read %d, %v; want EOF", n, err)
	}
	// And the tunnel ends though the host stays silent and open.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the tunnel did not end: %v", err)
	}
	// Its slot is free once its handler returns, just after.
	slots := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.slots
	}
	eventually(t, func() bool { return slots() == 0 }, func() string {
		return fmt.Sprintf("%d slots still taken", slots())
	})
}

// eventually fails the test if cond does not hold within half a minute
// (a hang guard: the conditions hold in milliseconds on an idle machine).
func eventually(t *testing.T, cond func() bool, say func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(say())
		}
	}
}

// settles waits for the number of goroutines to come down to at most n.
func settles(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d:\n%s", got, n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloseEndsOpenTunnelsAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	echo := startEcho(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a response that never ends
	}))
	u, _ := url.Parse(srv.URL)
	rec := &attempts{}
	p, err := Start([]string{echo.addr(), u.Host}, rec.record)
	if err != nil {
		t.Fatal(err)
	}

	var clients []net.Conn
	for range 3 {
		c, br, status := connect(t, p, echo.addr(), nil)
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		io.WriteString(c, "ping")
		if b, err := br.Peek(4); err != nil || string(b) != "ping" {
			t.Fatalf("echo: %q %v", b, err)
		}
		clients = append(clients, c)
	}
	// A client in the middle of its request line.
	half, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	io.WriteString(half, "CONNECT ")
	// A forwarded response that is still streaming.
	client := proxiedClient(p)
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b := make([]byte, 5); func() bool { _, err := io.ReadFull(resp.Body, b); return err != nil }() {
		t.Fatal("no first bytes")
	}

	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	p.Close() // again: a no-op
	n := len(rec.all())

	for i, c := range append(clients, half) {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("connection %d was not closed: %v", i, err)
		}
	}
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Error("the forwarded response ended cleanly; it was cut")
	}
	resp.Body.Close()
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts connections")
	}
	if len(rec.all()) != n {
		t.Error("an attempt was recorded after Close returned")
	}

	client.CloseIdleConnections()
	srv.Close()
	echo.close()
	settles(t, before)
}

func TestTheTunnelAfterTheLimitGets503(t *testing.T) {
	echo := startEcho(t)
	p, rec := startProxy(t, []string{echo.addr()}, defaultLimits)

	const n = 300
	type result struct {
		conn   net.Conn
		status int
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				results[i].err = err
				return
			}
			results[i].conn = c
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", echo.addr())
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				results[i].err = err
				return
			}
			results[i].status = resp.StatusCode
		})
	}
	wg.Wait()
	counts := map[int]int{}
	var open []net.Conn
	for _, r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.conn.Close()
		counts[r.status]++
		if r.status == 200 {
			open = append(open, r.conn)
		}
	}
	if counts[200] != MaxTunnels || counts[503] != n-MaxTunnels || len(counts) != 2 {
		t.Fatalf("statuses %v, want %d × 200 and %d × 503", counts, MaxTunnels, n-MaxTunnels)
	}
	refused := 0
	for _, at := range rec.all() {
		if at.Status == 503 {
			refused++
			if !at.Allowed || at.Reason != "too many tunnels open (256)" {
				t.Errorf("recorded %+v", at)
			}
		}
	}
	if refused != n-MaxTunnels {
		t.Errorf("recorded %d refusals, want %d", refused, n-MaxTunnels)
	}

	// A tunnel that ends frees its slot.
	open[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, status := connect(t, p, echo.addr(), nil)
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a tunnel closed, still %d", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEnvSendsEverythingThroughTheProxy(t *testing.T) {
	p, _ := startProxy(t, nil, defaultLimits)
	env := strings.Join(p.Env(), "\n")
	for _, want := range []string{"HTTPS_PROXY=" + p.URL(), "http_proxy=" + p.URL(), "NO_PROXY=\n", "no_proxy=\n"} {
		if !strings.Contains(env+"\n", want) {
			t.Errorf("Env lacks %q:\n%s", want, env)
		}
	}
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s", p.URL())
	}
}

func TestARecordCallbackIsNeverCalledConcurrently(t *testing.T) {
	var inside, overlaps int
	var mu sync.Mutex
	record := func(Attempt) {
		mu.Lock()
		inside++
		if inside > 1 {
			overlaps++
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inside--
		mu.Unlock()
	}
	p, err := Start(nil, record)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { rawExchange(t, p, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n") })
	}
	wg.Wait()
	if overlaps != 0 {
		t.Errorf("%d overlapping calls", overlaps)
	}
}

// TestThePlainRequestAfterTheLimitGets503: plain HTTP requests are capped
// as tunnels are: past the limit of requests in flight each is answered
// 503 and recorded, one that ends frees its slot, and the cap is the
// forwards' own (tunnels still open while it is reached).
//
// Class of input: a limit of one, a few, and the default, each met by a
// crowd of requests whose responses stream until released.
func TestThePlainRequestAfterTheLimitGets503(t *testing.T) {
	for _, forwards := range []int{1, 5, MaxForwards} {
		t.Run(fmt.Sprint("limit ", forwards), func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "first")
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			defer close(release)
			echo := startEcho(t)
			u, _ := url.Parse(srv.URL)
			lim := defaultLimits
			lim.forwards = forwards
			p, rec := startProxy(t, []string{u.Host, echo.addr()}, lim)
			client := proxiedClient(p)
			defer client.CloseIdleConnections()

			n := forwards + 20
			statuses := make([]int, n)
			bodies := make([]io.ReadCloser, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					resp, err := client.Get(srv.URL + "/stream")
					if err != nil {
						t.Error(err)
						return
					}
					statuses[i], bodies[i] = resp.StatusCode, resp.Body
				})
			}
			wg.Wait()
			counts := map[int]int{}
			var open []io.ReadCloser
			for i, s := range statuses {
				counts[s]++
				if s == 200 {
					open = append(open, bodies[i])
				} else if bodies[i] != nil {
					bodies[i].Close()
				}
			}
			defer func() {
				for _, b := range open {
					b.Close()
				}
			}()
			if counts[200] != forwards || counts[503] != n-forwards || len(counts) != 2 {
				t.Fatalf("statuses %v, want %d × 200 and %d × 503", counts, forwards, n-forwards)
			}
			want := fmt.Sprintf("too many requests in flight (%d)", forwards)
			refused := 0
			for _, at := range rec.all() {
				if at.Status == 503 {
					refused++
					if !at.Allowed || at.Reason != want || at.Method != "GET" {
						t.Errorf("recorded %+v", at)
					}
				}
			}
			if refused != n-forwards {
				t.Errorf("recorded %d refusals, want %d", refused, n-forwards)
			}
			// Tunnels have slots of their own.
			if _, _, status := connect(t, p, echo.addr(), nil); status != 200 {
				t.Errorf("a tunnel while plain requests are at their limit: %d", status)
			}
			// A request that ends frees its slot.
			open[0].Close()
			open = open[1:]
			eventually(t, func() bool {
				resp, err := client.Get(srv.URL + "/again")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == 200
			}, func() string { return "after a request ended, its slot was still taken" })
		})
	}
}
