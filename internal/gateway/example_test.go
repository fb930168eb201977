package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/acpflow/acpflow/internal/gateway"
)

// A step's gateway in front of a provider: the agent is given URL() and
// the placeholder, the provider gets the key, and the usage is the
// provider's.
func Example() {
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("provider got key:", r.Header.Get("X-Api-Key") == "sk-ant-the-real-key")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1000,"output_tokens":200}}`)
	}))
	defer provider.Close()

	placeholder := gateway.NewPlaceholder()
	g, err := gateway.Start(gateway.Config{
		Provider:    "anthropic",
		Upstream:    provider.URL,
		Key:         "sk-ant-the-real-key",
		Placeholder: placeholder,
		Client:      provider.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The agent: ANTHROPIC_BASE_URL=g.URL(), ANTHROPIC_API_KEY=placeholder.
	req, _ := http.NewRequest("POST", g.URL()+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`))
	req.Header.Set("X-Api-Key", placeholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	g.Close() // waits for the exchange to be metered

	u := g.Usage()["claude-sonnet-4-5"]
	fmt.Printf("%d in, %d out, $%.4f\n", u.Input, u.Output, *u.Cost)
	// Output:
	// provider got key: true
	// 1000 in, 200 out, $0.0060
}
