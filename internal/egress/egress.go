// Package egress is the network half of a step's sandbox (`network:` a
// list of hosts): an HTTP proxy on loopback, one per step, through which
// the agent reaches only the listed hosts. The kernel (Landlock) keeps the
// agent from connecting anywhere else directly; this proxy decides where
// the one way out leads, and records every request so that a step's result
// can say what the agent tried to reach.
//
// It speaks what HTTPS_PROXY and HTTP_PROXY clients send: CONNECT host:port
// for a tunnel (HTTPS, and anything else that tunnels), and absolute-URI
// requests (GET http://host/path) for plain HTTP.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Attempt is one request an agent sent to the proxy, allowed or not.
//
// It holds where the agent wanted to go and how the proxy answered, never
// what it sent: no URL path or query, no header, no body, since those
// carry tokens and keys and the record is kept with the run.
type Attempt struct {
	Host   string // as the client sent it, without brackets; "" when the request named none
	Port   int    // 0 when the request named none
	Method string // CONNECT for a tunnel, else the plain HTTP method
	// Allowed reports whether the allow list admits Host:Port. A request
	// it admits can still fail (Status 502 or 503; Reason says why).
	Allowed bool
	// Reason is empty when the request went through, else why not in a
	// few words: "host is not in the allow list", "too many tunnels open
	// (256)", "too many requests in flight (256)", a dial error.
	Reason string
	// Status is what the proxy answered: 200 for an opened tunnel, the
	// upstream's status for a forwarded request, 400, 403, 502 or 503 when
	// the proxy refused or failed.
	Status int
	Time   time.Time // when the request arrived
}

// Limits of one proxy. They bound what a misbehaving agent can hold open,
// not how long a well-behaved one may stream: a tunnel has no idle
// timeout, since agents keep streams open for minutes between events.
const (
	MaxTunnels        = 256              // open tunnels at once; more are answered 503
	MaxForwards       = 256              // plain HTTP requests in flight at once; more are answered 503
	MaxHeaderBytes    = 64 << 10         // request line and headers of one request (net/http adds 4 KiB of slack)
	ReadHeaderTimeout = 10 * time.Second // to send a request's line and headers
	DialTimeout       = 10 * time.Second // to reach an allowed host
)

// limits are the bounds one proxy runs with; tests shrink them.
type limits struct {
	tunnels       int
	forwards      int
	headerTimeout time.Duration
	dialTimeout   time.Duration
	// linger is how long a tunnel's other direction may go on once one
	// side has closed, so the last bytes in flight arrive (a response
	// after the client half-closed, a TLS close_notify) without a silent
	// peer holding a slot forever.
	linger time.Duration
	// idle is how long a client's kept-alive connection may wait between
	// plain HTTP requests. Not a tunnel's: a tunnel has none.
	idle time.Duration
}

var defaultLimits = limits{
	tunnels:       MaxTunnels,
	forwards:      MaxForwards,
	headerTimeout: ReadHeaderTimeout,
	dialTimeout:   DialTimeout,
	linger:        10 * time.Second,
	idle:          2 * time.Minute,
}

// Proxy is a running egress proxy. Its methods are safe for concurrent use.
type Proxy struct {
	allow  AllowList
	record func(Attempt)
	lim    limits

	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	dialer    net.Dialer

	ctx    context.Context // cancelled by Close: ends dials and forwarded requests
	cancel context.CancelFunc

	recordMu sync.Mutex // serialises record calls

	mu      sync.Mutex
	closed  bool
	slots   int                   // tunnels open or being opened
	sending int                   // plain HTTP requests being forwarded
	tunnels map[net.Conn]struct{} // both ends of every open tunnel, for Close

	serveDone chan struct{}  // closed when srv.Serve returns
	conns     sync.WaitGroup // client connections the http.Server still runs, with their handlers
	tunneling sync.WaitGroup // tunnel handlers, which outlive their connection's place in conns
	closeOnce sync.Once
}

// Start checks allow (see ParseAllow) and starts a proxy listening on
// 127.0.0.1 on a port the kernel picks.
//
// record is called once for every request that reaches the proxy's
// handler, allowed or refused, after the proxy has decided how to answer
// (for a tunnel: after dialing; for plain HTTP: when the upstream's
// response headers are in). Nil drops them.
//
// # Notes
//
// record runs on the request's own path and calls are serialised, so a
// slow record delays every request behind it: it should append to a slice
// or send on a buffered channel, not write to a database. Calls never
// overlap, and none happens after Close returns.
//
// A request that is not HTTP at all, or whose headers are too large or too
// slow, is answered by net/http (400, 431) or dropped before a handler
// sees it, and is not recorded: it names no host to record.
func Start(allow []string, record func(Attempt)) (*Proxy, error) {
	return start(allow, record, defaultLimits)
}

func start(allow []string, record func(Attempt), lim limits) (*Proxy, error) {
	list, err := ParseAllow(allow)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("egress: cannot listen on 127.0.0.1: %w", err)
	}
	p := &Proxy{
		allow:     list,
		record:    record,
		lim:       lim,
		ln:        ln,
		tunnels:   map[net.Conn]struct{}{},
		serveDone: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.dialer = net.Dialer{Timeout: lim.dialTimeout}
	p.transport = &http.Transport{
		// Never another proxy: the environment's HTTP_PROXY is acpflow's
		// own business, not the agent's way out.
		Proxy:       nil,
		DialContext: p.dialAllowed,
		// One upstream connection per request: nothing idles past the
		// request that opened it, so Close leaves no pooled connection
		// and a request never reuses a connection another one opened.
		DisableKeepAlives: true,
		// Pass the agent's Accept-Encoding and the upstream's body as
		// they are, not decompressed on the way.
		DisableCompression:     true,
		MaxResponseHeaderBytes: MaxHeaderBytes,
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: lim.headerTimeout,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		// net/http logs malformed requests and panics; the proxy prints
		// nothing, and a log line could carry what a client sent.
		ErrorLog:    log.New(io.Discard, "", 0),
		BaseContext: func(net.Listener) context.Context { return p.ctx },
		ConnState:   p.connState,
	}
	go func() {
		defer close(p.serveDone)
		p.srv.Serve(ln)
	}()
	return p, nil
}

// connState counts the client connections net/http serves, so Close can
// wait for their goroutines: each is added when accepted (on the Serve
// goroutine, before Serve returns) and done when closed or handed to a
// tunnel, which the handler counts from then on.
func (p *Proxy) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		p.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		p.conns.Done()
	}
}

// Addr is the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the loopback port the proxy listens on: the one port a
// sandboxed agent may connect to.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// URL is the proxy's address as a proxy URL, "http://127.0.0.1:PORT", the
// value of HTTPS_PROXY and HTTP_PROXY.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Env is the environment that sends an agent's traffic through the proxy,
// as KEY=VALUE entries that must replace any the environment already has
// for these keys.
//
// # Notes
//
// Both spellings are set because clients disagree: curl reads only the
// lower-case http_proxy (the upper-case one can be set by a CGI request's
// "Proxy:" header), Go and Python read either. ALL_PROXY covers curl's
// other protocols. NO_PROXY is empty so that no host bypasses the proxy;
// one that did would fail anyway, as the kernel refuses direct
// connections. NODE_USE_ENV_PROXY=1 makes Node's built-in http and fetch
// (Node 24 and later) honour the variables; older Node ignores them, and
// an agent on it needs its own proxy support.
func (p *Proxy) Env() []string {
	u := p.URL()
	return []string{
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=", "no_proxy=",
		"NODE_USE_ENV_PROXY=1",
	}
}

// Close stops the proxy: it closes the listener, every client connection
// and every tunnel, cancels dials and forwarded requests, and returns when
// the proxy's goroutines have ended. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		for c := range p.tunnels {
			c.Close()
		}
		p.mu.Unlock()
		p.cancel()
		p.srv.Close() // the listener and every connection not handed to a tunnel
		<-p.serveDone
		p.conns.Wait()
		p.tunneling.Wait()
		p.transport.CloseIdleConnections()
	})
	return nil
}

// serveHTTP sorts a request into a tunnel, a forward or a 400.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	at := Attempt{Method: r.Method, Time: time.Now()}
	switch {
	case r.Method == http.MethodConnect:
		p.tunnel(w, r, at)
	case r.URL.IsAbs():
		p.forward(w, r, at)
	default:
		// A request for the proxy itself ("GET /"): a client that was
		// not told it is talking to a proxy.
		if h, port, ok := splitHostPort(r.Host, 80); ok {
			at.Host, at.Port = h, port
		}
		p.refuse(w, at, http.StatusBadRequest, "not a proxy request: use CONNECT host:port or an absolute URI")
	}
}

// refuse answers a request the proxy will not carry, and records it.
func (p *Proxy) refuse(w http.ResponseWriter, at Attempt, status int, reason string) {
	at.Status, at.Reason = status, reason
	p.note(at)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, "acpflow egress proxy: "+reason+"\n")
}

// note hands one attempt to the record callback, one call at a time.
func (p *Proxy) note(at Attempt) {
	if p.record == nil {
		return
	}
	p.recordMu.Lock()
	defer p.recordMu.Unlock()
	p.record(at)
}

// dialAllowed dials addr if the allow list admits it. Callers check
// before dialing; checking here too means a forwarded request cannot reach
// another host by any path through net/http (a redirect it followed, a
// Host it preferred over the URL).
func (p *Proxy) dialAllowed(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, ok := splitHostPort(addr, 0)
	if !ok {
		return nil, errors.New("egress: not host:port: " + addr)
	}
	if ok, reason := p.allow.Allows(host, port); !ok {
		return nil, errors.New("egress: " + reason)
	}
	return p.dialer.DialContext(ctx, network, addr)
}
