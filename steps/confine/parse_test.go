package confine

import (
	"strings"
	"testing"
)

// A sandbox: value is read whole or refused naming the key at fault: the
// class is "each shape the key takes (boolean, mapping; network as on,
// off, a boolean or a host list) and each wrong one".
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name    string
		v       any
		want    string // Sandbox.String(), "none" for nil
		wantErr string
	}{
		{"true is the defaults", true, "write [], deny [], network on", ""},
		{"false is none", false, "none", ""},
		{"a mapping", map[string]any{"write": []any{"out"}, "deny": []any{"secrets"}, "network": "off", "required": false}, "write [out], deny [secrets], network off", ""},
		{"a host list", map[string]any{"network": []any{"api.example.com", "127.0.0.1:8080"}}, "write [], deny [], network api.example.com, 127.0.0.1:8080", ""},
		{"the gateway only", map[string]any{"network": "gateway"}, "write [], deny [], network gateway", ""},
		{"an unknown key", map[string]any{"netwrk": "off"}, "", `unknown key "netwrk"`},
		{"a bad network word", map[string]any{"network": "sometimes"}, "", "want on, off, gateway or a list"},
		{"a bad host", map[string]any{"network": []any{"https://x"}}, "", "sandbox.network[0]"},
		{"a path that is not a string", map[string]any{"write": []any{1}}, "", "sandbox.write[0]: want a path"},
		{"required not a boolean", map[string]any{"required": "yes"}, "", "sandbox.required: want true or false"},
		{"a string", "yes", "", "want true, false or a mapping"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := Parse(tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sb.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if sb, _ := Parse(map[string]any{"required": false}); !sb.Optional {
		t.Error("required: false should make the sandbox optional")
	}
}
