package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// tunnel answers CONNECT host:port: if the allow list admits it and a slot
// is free, it dials the host, answers 200 and copies bytes both ways until
// either side closes.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, at Attempt) {
	host, port, ok := splitHostPort(r.RequestURI, 0)
	if !ok {
		p.refuse(w, at, http.StatusBadRequest, "CONNECT needs host:port")
		return
	}
	at.Host, at.Port = host, port
	if ok, reason := p.allow.Allows(host, port); !ok {
		p.refuse(w, at, http.StatusForbidden, reason)
		return
	}
	at.Allowed = true
	if reason := p.reserve(); reason != "" {
		p.refuse(w, at, http.StatusServiceUnavailable, reason)
		return
	}
	defer p.release()

	// The request's context ends when Close cancels the proxy's, so a
	// dial in flight does not hold Close up for DialTimeout.
	up, err := p.dialer.DialContext(r.Context(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		p.refuse(w, at, http.StatusBadGateway, "cannot reach it: "+dialProblem(err))
		return
	}
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		p.refuse(w, at, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	if !p.track(client, up) {
		return // Close came first and has closed both
	}
	defer p.untrack(client, up)
	// net/http's header deadline must not cut a tunnel: it has none.
	client.SetDeadline(time.Time{})

	at.Status = http.StatusOK
	p.note(at)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// A client may send its first bytes (a TLS ClientHello) without
	// waiting for the 200; net/http may have read them already.
	if n := buffered.Reader.Buffered(); n > 0 {
		b, _ := buffered.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pipe(up, client)
	}()
	p.pipe(client, up)
	<-done
}

// pipe copies src to dst until src ends. When src closes cleanly, dst is
// told so by a half-close (its peer reads EOF after every byte in flight)
// and the other direction gets the linger time to finish; on an error both
// directions stop now. Deadlines, not Close, end the other direction, so
// each connection is closed once, by its tunnel, after both pipes return.
func (p *Proxy) pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	stop := time.Now()
	if err == nil {
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			hc.CloseWrite()
		}
		stop = stop.Add(p.lim.linger)
	}
	src.SetDeadline(stop)
	dst.SetDeadline(stop)
}

// reserve takes a tunnel slot before dialing, so that MaxTunnels bounds
// dials in flight as well as open tunnels. It returns why not, or "".
func (p *Proxy) reserve() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why := p.take(&p.slots, p.lim.tunnels, "tunnels open"); why != "" {
		return why
	}
	// Added under mu while not closed, so never after Close's Wait began.
	p.tunneling.Add(1)
	return ""
}

// take counts one more of what held counts (tunnels, plain requests),
// unless the proxy is closing or limit of them are held: it returns why
// not, or "". The caller holds mu.
func (p *Proxy) take(held *int, limit int, what string) string {
	if p.closed {
		return "the proxy is closing"
	}
	if *held >= limit {
		return "too many " + what + " (" + strconv.Itoa(limit) + ")"
	}
	*held++
	return ""
}

func (p *Proxy) release() {
	p.mu.Lock()
	p.slots--
	p.mu.Unlock()
	p.tunneling.Done()
}

// track registers a tunnel's connections for Close. If Close has already
// run, it closes them and reports false.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
		c.Close()
	}
}

// dialProblem is a dial error without the address the record already has:
// "connect: connection refused", "i/o timeout", "lookup x: no such host".
func dialProblem(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// splitHostPort splits an authority (host, host:port, [v6], [v6]:port)
// as a client sends it. defaultPort 0 means the port is required.
func splitHostPort(s string, defaultPort int) (host string, port int, ok bool) {
	host, portStr, hasPort, problem := splitEntry(s)
	if problem != "" || host == "" {
		return "", 0, false
	}
	if !hasPort {
		if defaultPort == 0 {
			return "", 0, false
		}
		return host, defaultPort, true
	}
	port, ok = parsePort(portStr)
	return host, port, ok
}
