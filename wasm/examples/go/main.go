// Command policy is the strict acpflow policy (wasm/examples/README.md) as a
// WASI command: the request on stdin, the kind in argv[1], one JSON answer
// on stdout. Build: GOOS=wasip1 GOARCH=wasm go build -o policy.wasm .
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// request holds the parts each kind reads, decoded only for that kind, so
// that a permission request is not refused for its env parts or the reverse.
type request struct {
	Tool     json.RawMessage `json:"tool"`
	Proposed json.RawMessage `json:"proposed"`
}

type tool struct {
	Kind      string `json:"kind"`
	Command   string `json:"command"`
	Locations []struct {
		InWorkspace bool `json:"in_workspace"`
	} `json:"locations"`
}

type verdict struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("malformed request: %v", err)
	}
	if len(os.Args) < 2 {
		fail("usage: policy permission|env")
	}
	var answer any
	switch os.Args[1] {
	case "permission":
		var t tool
		decode(req.Tool, &t)
		answer = permission(&t)
	case "env":
		var proposed map[string]*string
		decode(req.Proposed, &proposed)
		answer = env(proposed)
	default:
		fail("unknown kind %q", os.Args[1])
	}
	if err := json.NewEncoder(os.Stdout).Encode(answer); err != nil {
		fail("%v", err)
	}
}

// decode reads one part of the request; a missing part is its zero value.
func decode(part json.RawMessage, v any) {
	if part == nil {
		return
	}
	if err := json.Unmarshal(part, v); err != nil {
		fail("malformed request: %v", err)
	}
}

func permission(tool *tool) verdict {
	switch tool.Kind {
	case "read", "search", "think":
		return verdict{"allow", "read-only tool"}
	case "edit":
		inside := len(tool.Locations) > 0
		for _, l := range tool.Locations {
			inside = inside && l.InWorkspace
		}
		if inside {
			return verdict{"allow", "edit inside the workspace"}
		}
	}
	for _, cmd := range commands(tool.Command) {
		switch firstWord(cmd) {
		case "rm", "sudo", "curl":
			return verdict{"reject", "destructive or networked command"}
		}
	}
	return verdict{"reject", "not allowed by the strict policy"}
}

// commands cuts a command line at &&, ||, ; and |, left to right.
func commands(line string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(line); i++ {
		n := 0
		switch {
		case strings.HasPrefix(line[i:], "&&"), strings.HasPrefix(line[i:], "||"):
			n = 2
		case line[i] == ';', line[i] == '|':
			n = 1
		default:
			continue
		}
		parts = append(parts, line[start:i])
		start = i + n
		i += n - 1
	}
	return append(parts, line[start:])
}

func firstWord(cmd string) string {
	fields := strings.FieldsFunc(cmd, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// env takes pointers so that a null value is told from "" and refused.
func env(proposed map[string]*string) any {
	for name, value := range proposed {
		if value == nil {
			fail("malformed request: proposed %s is null, not a string", name)
		}
	}
	if _, ok := proposed["HOME"]; !ok {
		return map[string]string{"deny": "no HOME"}
	}
	kept := map[string]string{}
	for name, value := range proposed {
		if !strings.HasPrefix(name, "AWS_") {
			kept[name] = *value
		}
	}
	return map[string]map[string]string{"env": kept}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "policy: "+format+"\n", args...)
	os.Exit(1)
}
