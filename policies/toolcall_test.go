package policies

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		title    string
		rawInput any
		want     string
	}{
		{"a string command is taken as it is", "execute", "Run", map[string]any{"command": "rm -rf build", "description": "clean"}, "rm -rf build"},
		{"codex's bash -lc argv is its script", "execute", "rm -rf build", map[string]any{"command": []any{"/bin/bash", "-lc", "rm -rf build"}}, "rm -rf build"},
		{"a shell by name with -c is its script", "", "", map[string]any{"command": []any{"bash", "-c", "make && rm -rf x"}}, "make && rm -rf x"},
		{"a shell with clustered flags is its script", "", "", map[string]any{"command": []any{"sh", "-euc", "rm x", "name", "arg"}}, "rm x"},
		{"zsh, dash and ksh scripts are unwrapped", "", "", map[string]any{"command": []any{"/usr/bin/zsh", "-ic", "rm x"}}, "rm x"},
		{"a shell through env is its script", "", "", map[string]any{"command": []any{"/usr/bin/env", "bash", "-lc", "rm x"}}, "rm x"},
		{"a shell without -c is quoted", "", "", map[string]any{"command": []any{"bash", "script.sh"}}, "bash script.sh"},
		{"another argv is shell-quoted", "", "", map[string]any{"command": []any{"rm", "-rf", "my dir", "it's"}}, `rm -rf 'my dir' "it's"`},
		{"an argv with operators is quoted so they stay arguments", "", "", map[string]any{"command": []any{"echo", "a && rm x"}}, "echo 'a && rm x'"},
		{"a string slice is an argv", "", "", map[string]any{"command": []string{"ls", "-la"}}, "ls -la"},
		{"numbers and booleans in an argv are printed", "", "", map[string]any{"command": []any{"sleep", float64(5), true}}, "sleep 5 true"},
		{"an empty argv gives an empty command", "execute", "t", map[string]any{"command": []any{}}, ""},
		{"a command of another type gives an empty command", "execute", "t", map[string]any{"command": 42.0}, ""},
		{"raw input without a command gives an empty command", "edit", "t", map[string]any{"path": "/x"}, ""},
		{"a command key in another case is not a command", "execute", "t", map[string]any{"Command": "ls"}, ""},
		{"raw input that is not an object gives an empty command", "execute", "t", []any{"ls"}, ""},
		{"gemini's execute call without raw input is its title", "execute", "rm -rf build", nil, "rm -rf build"},
		{"an execute call with empty raw input is its title", "execute", "rm -rf build", map[string]any{}, "rm -rf build"},
		{"another kind without raw input gives an empty command", "edit", "Write a.go", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommandLine(tt.kind, tt.title, tt.rawInput); got != tt.want {
				t.Errorf("CommandLine(%q, %q, %#v) = %q, want %q", tt.kind, tt.title, tt.rawInput, got, tt.want)
			}
		})
	}
}

// TestCommandLineQuotesArgvsSoTheyParseBack checks that a quoted argv is
// read by Commands as the same words, whatever they hold.
func TestCommandLineQuotesArgvsSoTheyParseBack(t *testing.T) {
	for _, argv := range [][]string{
		{"rm", "-rf", "a b"}, {"echo", "'", `"`, `\`, "$HOME", "`x`", "$(rm x)", "a;b", "#c", "~", "*", "{a,b}", "x=1"},
		{"printf", "tab\there", "new\nline", "bell\a", "é", ""}, {"/bin/rm", "--", "-rf"},
	} {
		t.Run(strings.Join(argv, " ")+" parses back", func(t *testing.T) {
			line := argvLine(argv)
			got, err := Commands(line)
			want := programName(argv[0]) + " " + strings.Join(argv[1:], " ")
			if err != nil || len(got) != 1 || got[0] != want {
				t.Errorf("Commands(%q) = %q, %v; want [%q]", line, got, err, want)
			}
		})
	}
}

func TestToolNormalize(t *testing.T) {
	t.Run("no raw input becomes an empty object and an execute title the command", func(t *testing.T) {
		tool := Tool{Kind: "execute", Title: "rm -rf build"}
		tool.Normalize()
		if tool.Command != "rm -rf build" || !reflect.DeepEqual(tool.RawInput, map[string]any{}) {
			t.Errorf("tool = %+v", tool)
		}
	})
	t.Run("a command already set is kept", func(t *testing.T) {
		tool := Tool{Kind: "execute", Title: "t", Command: "ls", RawInput: map[string]any{"command": "rm x"}}
		tool.Normalize()
		if tool.Command != "ls" {
			t.Errorf("Command = %q", tool.Command)
		}
	})
	t.Run("a request decoded without raw input gets an empty object", func(t *testing.T) {
		req, err := DecodePermissionRequest([]byte(`{"tool": {"kind": "execute", "title": "rm -rf build"}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(req.Tool)
		if req.Tool.Command != "rm -rf build" || !strings.Contains(string(b), `"raw_input":{}`) {
			t.Errorf("tool = %s", b)
		}
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// acpRequest is the params of an ACP session/request_permission, as the
// agents send them.
type acpRequest struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string `json:"toolCallId"`
		Title      string `json:"title"`
		Kind       string `json:"kind"`
		Status     string `json:"status"`
		RawInput   any    `json:"rawInput"`
		Locations  []struct {
			Path string `json:"path"`
		} `json:"locations"`
	} `json:"toolCall"`
	Options []struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
	} `json:"options"`
}

// TestCommandLineOfEachAgent derives tool.command from the requests the
// agents send, in the shapes recorded from claude-agent-acp 0.23.1,
// codex-acp 0.16.0 and gemini-cli 0.61.0 (issue 9), and from the captures
// in testdata/acp-requests when they are there.
func TestCommandLineOfEachAgent(t *testing.T) {
	requests := map[string]string{
		"claude-execute": `{"sessionId": "s", "toolCall": {"toolCallId": "toolu_01", "title": "rm -rf build", "kind": "execute", "status": "pending",
			"rawInput": {"command": "rm -rf build", "description": "Remove the build directory"}}, "options": [{"optionId": "allow", "kind": "allow_once"}]}`,
		"codex-execute": `{"sessionId": "s", "toolCall": {"toolCallId": "call_1", "title": "rm -rf build", "kind": "execute", "status": "pending",
			"rawInput": {"command": ["/bin/bash", "-lc", "rm -rf build"], "cwd": "/ws", "parsed_cmd": [{"type": "unknown", "cmd": "rm -rf build"}]}},
			"options": [{"optionId": "approved", "kind": "allow_once"}, {"optionId": "approved-for-session", "kind": "allow_always"}, {"optionId": "abort", "kind": "reject_once"}]}`,
		"gemini-execute": `{"sessionId": "s", "toolCall": {"toolCallId": "run_shell_command-1", "title": "rm -rf build", "kind": "execute", "status": "pending"},
			"options": [{"optionId": "proceed_always", "kind": "allow_always"}, {"optionId": "proceed_once", "kind": "allow_once"}, {"optionId": "cancel", "kind": "reject_once"}]}`,
	}
	want := map[string]string{
		"claude-execute": "rm -rf build", "codex-execute": "rm -rf build", "gemini-execute": "rm -rf build",
		// What the scripted model asked each agent to run in the captures.
		"captured claude-execute.json": "echo hi > shell.txt",
		"captured codex-execute.json":  "rm -rf build",
		"captured gemini-execute.json": "mkdir -p d && echo hi > d/shell.txt",
		"captured claude-edit.json":    "", "captured codex-edit.json": "", "captured gemini-edit.json": "",
	}
	var captured []string
	for _, agent := range []string{"claude", "codex", "gemini"} {
		for _, kind := range []string{"execute", "edit"} {
			if path := "testdata/acp-requests/" + agent + "-" + kind + ".json"; fileExists(path) {
				captured = append(captured, path)
			}
		}
	}
	for _, path := range captured {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		requests["captured "+filepath.Base(path)] = string(b)
	}
	names := make([]string, 0, len(requests))
	for name := range requests {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name+" gives the command it runs", func(t *testing.T) {
			var r acpRequest
			if err := json.Unmarshal([]byte(requests[name]), &r); err != nil {
				t.Fatal(err)
			}
			tool := Tool{Kind: r.ToolCall.Kind, Title: r.ToolCall.Title, RawInput: r.ToolCall.RawInput}
			tool.Normalize()
			if w, known := want[name]; known && tool.Command != w {
				t.Errorf("tool.command = %q, want %q", tool.Command, w)
			}
			// A capture's command is not known here; it must be there for an
			// execute call, readable by commands(), and absent for an edit.
			switch r.ToolCall.Kind {
			case "execute":
				if cmds, err := Commands(tool.Command); len(cmds) == 0 || err != nil {
					t.Errorf("commands(%q) = %q, %v", tool.Command, cmds, err)
				}
			case "edit":
				if tool.Command != "" {
					t.Errorf("tool.command of an edit = %q, want empty", tool.Command)
				}
			}
			if tool.RawInput == nil {
				t.Error("raw_input is nil, want {}")
			}
		})
	}
}
