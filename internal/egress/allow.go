package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AllowList is a parsed `network:` list: the hosts, and optionally the
// ports, a step's agent may reach through its proxy. The zero value allows
// nothing.
type AllowList struct {
	rules []rule
}

// rule is one entry, normalised so that matching is a string compare.
type rule struct {
	host     string // lower case, no trailing dot, no brackets; an IP in netip's canonical form
	wildcard bool   // host is a suffix: "*.example.com" is stored as "example.com"
	port     int    // 0 means any port
}

// EntryError is one allow list entry that is not a host or host:port.
// Index says which entry, so that the workflow loader can point at its
// line.
type EntryError struct {
	Index   int
	Entry   string
	Problem string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("egress: %q: %s", e.Entry, e.Problem)
}

const notHost = "not a host or host:port"

// ParseAllow checks and normalises allow list entries. An entry is
//
//   - host: any port on that host, e.g. "api.example.com" or "10.0.0.1";
//   - host:port: that port only, e.g. "api.example.com:443";
//   - an IPv6 literal in brackets, with or without a port: "[2001:db8::1]",
//     "[2001:db8::1]:443";
//   - "*.example.com" (optionally with :port): any name below example.com,
//     at any depth, but not example.com itself, which needs its own entry.
//
// Host names match case-insensitively and exactly, a trailing dot ignored;
// IP addresses match by value ("[::ffff:127.0.0.1]" is 127.0.0.1), never a
// name that resolves to them, and a name never matches by what it resolves
// to.
//
// # Notes
//
// Every bad entry is reported, each an *EntryError joined with
// errors.Join, so a loader can report them all at their own positions; the
// first such error alone is what errors.As finds. An empty list is valid
// and allows nothing.
func ParseAllow(entries []string) (AllowList, error) {
	var list AllowList
	var errs []error
	for i, e := range entries {
		r, problem := parseEntry(e)
		if problem != "" {
			errs = append(errs, &EntryError{Index: i, Entry: e, Problem: problem})
			continue
		}
		list.rules = append(list.rules, r)
	}
	if len(errs) > 0 {
		return AllowList{}, errors.Join(errs...)
	}
	return list, nil
}

// parseEntry returns the rule, or a problem saying what is wrong with it.
func parseEntry(e string) (rule, string) {
	hostPart, portPart, hasPort, problem := splitEntry(e)
	if problem != "" {
		return rule{}, problem
	}
	var r rule
	var ok bool
	if rest, isWild := strings.CutPrefix(hostPart, "*."); isWild {
		if r.host, ok = normalName(rest); !ok {
			return rule{}, notHost
		}
		if _, err := netip.ParseAddr(r.host); err == nil {
			return rule{}, "a wildcard goes before a domain name, not an IP address"
		}
		r.wildcard = true
	} else if strings.Contains(hostPart, "*") {
		return rule{}, `a wildcard is only "*." before a domain, as in "*.example.com"`
	} else if r.host, ok = normalHost(hostPart); !ok {
		return rule{}, notHost
	}
	if hasPort {
		p, ok := parsePort(portPart)
		if !ok {
			return rule{}, "port " + strconv.Quote(portPart) + " is not a number from 1 to 65535"
		}
		r.port = p
	}
	return r, ""
}

// splitEntry splits an entry into host and port. Unlike net.SplitHostPort
// the port is optional, so a bare IPv6 address is ambiguous ("::1" or
// host "::" port 1?) and must be bracketed.
func splitEntry(e string) (host, port string, hasPort bool, problem string) {
	if strings.Contains(e, "/") { // a URL, or a host with a path
		return "", "", false, notHost
	}
	if strings.HasPrefix(e, "[") {
		end := strings.IndexByte(e, ']')
		if end < 0 {
			return "", "", false, notHost
		}
		host, rest := e[1:end], e[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", "", false, "not an IPv6 address in brackets"
		}
		if rest == "" {
			return host, "", false, ""
		}
		if port, ok := strings.CutPrefix(rest, ":"); ok {
			return host, port, true, ""
		}
		return "", "", false, notHost
	}
	switch strings.Count(e, ":") {
	case 0:
		return e, "", false, ""
	case 1:
		h, p, _ := strings.Cut(e, ":")
		return h, p, true, ""
	}
	if a, err := netip.ParseAddr(e); err == nil && a.Is6() {
		return "", "", false, "an IPv6 address goes in brackets: " + strconv.Quote("["+e+"]")
	}
	return "", "", false, notHost
}

// parsePort accepts decimal digits only: "+80", " 80" and "https" are
// not ports here, though strconv.Atoi or a resolver would take some.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	p, _ := strconv.Atoi(s)
	return p, p >= 1 && p <= 65535
}

// normalHost returns the form rules and requests are compared in: an IP
// address canonical and unmapped, a name lower case without its trailing
// dot. It reports false for anything else, so a request for such a host is
// refused before anything is dialed.
func normalHost(h string) (string, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", false
		}
		return a.Unmap().String(), true
	}
	return normalName(h)
}

// normalName checks a DNS name: labels of letters, digits, '-' and '_'
// (which real service names use), at most 63 bytes each and 253 in all.
// Internationalised names must be given in their ASCII (xn--) form, which
// is what clients send.
func normalName(h string) (string, bool) {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	return strings.ToLower(h), true
}

// Allows reports whether the list admits host:port, and if not, why, in a
// few words fit for a 403 body and the record. host is as a client sends
// it: a name, an IPv4 address or an IPv6 address without brackets.
func (l AllowList) Allows(host string, port int) (bool, string) {
	h, ok := normalHost(host)
	if !ok {
		return false, "not a host name or IP address"
	}
	hostListed := false
	for _, r := range l.rules {
		if !r.matchesHost(h) {
			continue
		}
		if r.port == 0 || r.port == port {
			return true, ""
		}
		hostListed = true
	}
	if hostListed {
		return false, "port " + strconv.Itoa(port) + " is not in the allow list for this host"
	}
	return false, "host is not in the allow list"
}

func (r rule) matchesHost(h string) bool {
	if r.wildcard {
		// An IP address is never below a domain, though "127.0.0.1" ends
		// in ".0.0.1".
		if _, err := netip.ParseAddr(h); err == nil {
			return false
		}
		return strings.HasSuffix(h, "."+r.host)
	}
	return h == r.host
}
