package egress_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/acpflow/acpflow/internal/egress"
)

// A step's proxy lets its agent reach api.example.com on 443 only; the
// agent's request elsewhere is refused before anything is dialed, and
// recorded.
func ExampleStart() {
	var mu sync.Mutex
	var tried []egress.Attempt
	p, err := egress.Start([]string{"api.example.com:443"}, func(a egress.Attempt) {
		mu.Lock() // calls never overlap, but the step reads tried from elsewhere
		tried = append(tried, a)
		mu.Unlock()
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	// What the agent does, given p.Env(): an HTTPS request via the proxy.
	proxy, _ := url.Parse(p.URL())
	agent := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	_, err = agent.Get("https://other.example.com/v1/data?key=secret")
	fmt.Println("refused:", err != nil)

	mu.Lock()
	a := tried[0]
	mu.Unlock()
	fmt.Println(a.Method, a.Host, a.Port, a.Allowed, a.Status, a.Reason)
	// Output:
	// refused: true
	// CONNECT other.example.com 443 false 403 host is not in the allow list
}

func ExampleParseAllow() {
	_, err := egress.ParseAllow([]string{"api.example.com:443", "*.githubusercontent.com", "ho st", "::1"})
	fmt.Println(err)
	// Output:
	// egress: "ho st": not a host or host:port
	// egress: "::1": an IPv6 address goes in brackets: "[::1]"
}
