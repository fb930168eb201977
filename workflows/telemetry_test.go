package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An outer policy's telemetry: (docs/traces.md) loads with the outermost
// file's settings, and each mistake is named at its line.
func TestTelemetryInAnOuterPolicy(t *testing.T) {
	dir := t.TempDir()
	system := filepath.Join(dir, "system.yaml")
	withSystemPolicy(t, system)
	os.WriteFile(system, []byte("telemetry:\n  endpoint: https://otel.example:4318\n  protocol: grpc\n  headers: {x-team: 7}\n  content: true\n  trace-url: https://j.example/t/{trace_id}\n"), 0o644)
	user := filepath.Join(dir, "user.yaml")
	os.WriteFile(user, []byte("telemetry:\n  endpoint: http://localhost:4318\n"), 0o644)
	outer, err := LoadOuterPolicy(user, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tel := outer.Telemetry()
	if tel == nil || tel.File != system || tel.Endpoint != "https://otel.example:4318" || tel.Protocol != "grpc" ||
		tel.Headers["x-team"] != "7" || !tel.Content || tel.TraceURL != "https://j.example/t/{trace_id}" {
		t.Errorf("Telemetry() = %+v, want the system file's", tel)
	}
	for _, c := range []struct{ body, want string }{
		{"telemetry: true\n", ""},
		{"telemetry:\n  protocol: http/json\n", "2:13: telemetry.protocol: \"http/json\" is not one acpflow exports with; write http/protobuf or grpc"},
		{"telemetry:\n  endpoint: localhost:4318\n", "telemetry.endpoint: \"localhost:4318\" is not an http(s) URL with a host"},
		{"telemetry:\n  endpoint: https://u:pw@otel.example\n", "leave the user and password out of the URL"},
		{"telemetry:\n  trace-url: https://j.example/t/\n", "has no {trace_id}"},
		{"telemetry:\n  endpoit: https://otel.example\n", `unknown key "endpoit"; did you mean "endpoint"?`},
		{"telemetry:\n  headers:\n    x team: t\n", `3:5: telemetry.headers: "x team" is not an HTTP header name`},
		{"telemetry:\n  headers:\n    x-team: \"a\\nb\"\n", "3:13: telemetry.headers.x-team: a header value is one line"},
	} {
		p := filepath.Join(dir, "p.yaml")
		os.WriteFile(p, []byte(c.body), 0o644)
		_, err := LoadPolicyFile(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
}

// telemetry: in a workflow (top level or under policies:) is refused at
// its line, saying where it belongs: an outer policy file.
func TestTelemetryInAWorkflowSaysWhereItBelongs(t *testing.T) {
	for _, src := range []string{
		"name: t\ntelemetry: {endpoint: http://127.0.0.1:4318}\nsteps:\n  - {id: a, run: echo}\n",
		"name: t\npolicies:\n  telemetry: {endpoint: http://127.0.0.1:4318}\nsteps:\n  - {id: a, run: echo}\n",
	} {
		_, err := Parse("wf.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), `unknown key "telemetry"; telemetry: goes in an outer policy file`) {
			t.Errorf("%q: %v", src, err)
		}
	}
}
