package egress

import (
	"errors"
	"testing"
)

func TestAllowListAdmits(t *testing.T) {
	cases := []struct {
		name  string
		allow []string
		host  string
		port  int
		want  bool
	}{
		{"a host without a port admits any port", []string{"api.example.com"}, "api.example.com", 8443, true},
		{"a host:port admits that port", []string{"api.example.com:443"}, "api.example.com", 443, true},
		{"a host:port refuses another port", []string{"api.example.com:443"}, "api.example.com", 80, false},
		{"names match case-insensitively", []string{"API.Example.COM"}, "api.EXAMPLE.com", 443, true},
		{"a trailing dot is the same name", []string{"api.example.com."}, "api.example.com", 443, true},
		{"a request's trailing dot is the same name", []string{"api.example.com"}, "api.example.com.", 443, true},
		{"a subdomain is not the domain", []string{"example.com"}, "api.example.com", 443, false},
		{"a name that contains the entry is not it", []string{"example.com"}, "evilexample.com", 443, false},
		{"a wildcard admits a subdomain", []string{"*.example.com"}, "api.example.com", 443, true},
		{"a wildcard admits deeper names", []string{"*.example.com"}, "a.b.example.com", 443, true},
		{"a wildcard does not admit the domain itself", []string{"*.example.com"}, "example.com", 443, false},
		{"a wildcard does not admit a look-alike", []string{"*.example.com"}, "evilexample.com", 443, false},
		{"a wildcard with a port refuses another port", []string{"*.example.com:443"}, "api.example.com", 80, false},
		{"a wildcard never admits an IP address", []string{"*.0.1"}, "127.0.0.1", 80, false},
		{"an IPv4 address matches itself", []string{"127.0.0.1:80"}, "127.0.0.1", 80, true},
		{"an IP address does not match a name", []string{"127.0.0.1"}, "localhost", 80, false},
		{"a name does not match an IP address", []string{"localhost"}, "127.0.0.1", 80, false},
		{"a bracketed IPv6 address matches", []string{"[::1]:443"}, "::1", 443, true},
		{"IPv6 addresses match by value", []string{"[0:0::1]"}, "0000::0001", 443, true},
		{"a mapped IPv4 address is the IPv4 address", []string{"127.0.0.1"}, "::ffff:127.0.0.1", 1, true},
		{"the empty list admits nothing", nil, "api.example.com", 443, false},
		{"a request host that is no host is refused", []string{"api.example.com"}, "api example.com", 443, false},
		{"one of several entries admits", []string{"a.example.com:443", "b.example.com"}, "b.example.com", 22, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := ParseAllow(c.allow)
			if err != nil {
				t.Fatal(err)
			}
			got, reason := l.Allows(c.host, c.port)
			if got != c.want {
				t.Fatalf("Allows(%q, %d) = %v (%s), want %v", c.host, c.port, got, reason, c.want)
			}
			if got != (reason == "") {
				t.Fatalf("reason %q with allowed %v", reason, got)
			}
		})
	}
}

func TestRefusalSaysWhetherThePortOrTheHostIsMissing(t *testing.T) {
	l, err := ParseAllow([]string{"api.example.com:443"})
	if err != nil {
		t.Fatal(err)
	}
	if _, reason := l.Allows("api.example.com", 80); reason != "port 80 is not in the allow list for this host" {
		t.Errorf("other port: %q", reason)
	}
	if _, reason := l.Allows("other.example.com", 443); reason != "host is not in the allow list" {
		t.Errorf("other host: %q", reason)
	}
}

func TestParseAllowErrors(t *testing.T) {
	cases := []struct {
		entry string
		want  string
	}{
		{"ho st", `egress: "ho st": not a host or host:port`},
		{"", `egress: "": not a host or host:port`},
		{" example.com", `egress: " example.com": not a host or host:port`},
		{"http://example.com", `egress: "http://example.com": not a host or host:port`},
		{"example.com/path", `egress: "example.com/path": not a host or host:port`},
		{"user@example.com", `egress: "user@example.com": not a host or host:port`},
		{"a..b", `egress: "a..b": not a host or host:port`},
		{"-a.example.com", `egress: "-a.example.com": not a host or host:port`},
		{":443", `egress: ":443": not a host or host:port`},
		{"example.com:", `egress: "example.com:": port "" is not a number from 1 to 65535`},
		{"example.com:0", `egress: "example.com:0": port "0" is not a number from 1 to 65535`},
		{"example.com:65536", `egress: "example.com:65536": port "65536" is not a number from 1 to 65535`},
		{"example.com:https", `egress: "example.com:https": port "https" is not a number from 1 to 65535`},
		{"example.com:+80", `egress: "example.com:+80": port "+80" is not a number from 1 to 65535`},
		{"example.com:1:2", `egress: "example.com:1:2": not a host or host:port`},
		{"::1", `egress: "::1": an IPv6 address goes in brackets: "[::1]"`},
		{"2001:db8::1", `egress: "2001:db8::1": an IPv6 address goes in brackets: "[2001:db8::1]"`},
		{"[127.0.0.1]", `egress: "[127.0.0.1]": not an IPv6 address in brackets`},
		{"[example.com]:443", `egress: "[example.com]:443": not an IPv6 address in brackets`},
		{"[fe80::1%eth0]", `egress: "[fe80::1%eth0]": not an IPv6 address in brackets`},
		{"[::1", `egress: "[::1": not a host or host:port`},
		{"[::1]443", `egress: "[::1]443": not a host or host:port`},
		{"*", `egress: "*": a wildcard is only "*." before a domain, as in "*.example.com"`},
		{"api.*.com", `egress: "api.*.com": a wildcard is only "*." before a domain, as in "*.example.com"`},
		{"*example.com", `egress: "*example.com": a wildcard is only "*." before a domain, as in "*.example.com"`},
		{"*.", `egress: "*.": not a host or host:port`},
		{"*.10.0.0.1", `egress: "*.10.0.0.1": a wildcard goes before a domain name, not an IP address`},
	}
	for _, c := range cases {
		t.Run(c.entry, func(t *testing.T) {
			_, err := ParseAllow([]string{"ok.example.com", c.entry})
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != c.want {
				t.Errorf("error\n got %s\nwant %s", err, c.want)
			}
			var ee *EntryError
			if !errors.As(err, &ee) || ee.Index != 1 || ee.Entry != c.entry {
				t.Errorf("want an *EntryError for entry 1, got %#v", err)
			}
		})
	}
}

func TestParseAllowReportsEveryBadEntry(t *testing.T) {
	_, err := ParseAllow([]string{"a b", "ok.example.com", "c:0"})
	want := `egress: "a b": not a host or host:port` + "\n" +
		`egress: "c:0": port "0" is not a number from 1 to 65535`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	var indexes []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		indexes = append(indexes, e.(*EntryError).Index)
	}
	if len(indexes) != 2 || indexes[0] != 0 || indexes[1] != 2 {
		t.Errorf("indexes %v, want [0 2]", indexes)
	}
}

func TestStartRefusesABadAllowList(t *testing.T) {
	p, err := Start([]string{"ho st"}, nil)
	if err == nil {
		p.Close()
		t.Fatal("started")
	}
	if err.Error() != `egress: "ho st": not a host or host:port` {
		t.Errorf("error: %v", err)
	}
}
