package egress

import (
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// forward carries a plain HTTP proxy request (GET http://host/path) to an
// allowed host and streams the response back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, at Attempt) {
	u := r.URL
	host, port, ok := splitHostPort(u.Host, 80)
	if ok {
		at.Host, at.Port = host, port
	}
	if u.Scheme != "http" {
		// An https:// URI here would have the proxy open TLS on the
		// agent's behalf; clients tunnel it with CONNECT instead.
		p.refuse(w, at, http.StatusBadRequest, "only http:// URIs are forwarded; use CONNECT for "+u.Scheme)
		return
	}
	if !ok {
		p.refuse(w, at, http.StatusBadRequest, "the URI names no valid host")
		return
	}
	if ok, reason := p.allow.Allows(host, port); !ok {
		p.refuse(w, at, http.StatusForbidden, reason)
		return
	}
	at.Allowed = true
	// As a tunnel takes a slot: a request whose upstream never answers,
	// or whose response streams for minutes, holds an upstream
	// connection and a goroutine for as long.
	if reason := p.reserveForward(); reason != "" {
		p.refuse(w, at, http.StatusServiceUnavailable, reason)
		return
	}
	defer p.releaseForward()

	out := r.Clone(r.Context())
	out.RequestURI = ""
	// The URL's host is the one checked; a different Host header would
	// name another virtual host behind the same address.
	out.Host = ""
	dropHopHeaders(out.Header)
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.refuse(w, at, http.StatusBadGateway, "cannot reach it: "+dialProblem(err))
		return
	}
	defer resp.Body.Close()
	at.Status = resp.StatusCode
	p.note(at)

	relay(w, resp)
}

// relay streams an upstream's response back to the client.
func relay(w http.ResponseWriter, resp *http.Response) {
	dropHopHeaders(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	// Flush after every read: agents stream (server-sent events), and a
	// proxy that buffered would hold their events back.
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			// Cut the response off, without the last chunk: ending it
			// cleanly would tell the client it has the whole body.
			panic(http.ErrAbortHandler)
		}
	}
	for k, vv := range resp.Trailer {
		h[k] = vv
	}
}

// hopHeaders are about one connection, the client's to the proxy or the
// proxy's to the host (RFC 9110 §7.6.1), and are not passed on.
// Proxy-Authorization in particular is for this proxy, never a host.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func dropHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// reserveForward takes a slot for a plain HTTP request before it is
// forwarded, so that MaxForwards bounds the requests in flight as
// MaxTunnels bounds tunnels. It returns why not, or "".
func (p *Proxy) reserveForward() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.take(&p.sending, p.lim.forwards, "requests in flight")
}

func (p *Proxy) releaseForward() {
	p.mu.Lock()
	p.sending--
	p.mu.Unlock()
}
