package demoagent_test

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/demoagent"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestParsePrompt(t *testing.T) {
	tests := []struct {
		name      string
		prompt    string
		wantEcho  string
		wantTools []demoagent.ToolRequest
	}{
		{"a plain prompt echoes its first line", "Hello\nworld", "Hello", nil},
		{"leading blank lines are skipped", "\n  \nHello", "Hello", nil},
		{"a tool line gives kind and title", "Go\ntool: execute rm -rf /tmp/x",
			"Go", []demoagent.ToolRequest{{Kind: "execute", Title: "rm -rf /tmp/x"}}},
		{"indented tool lines count, in order", "Go\n  tool: read a.txt\r\ntool:   edit  b.txt  \n",
			"Go", []demoagent.ToolRequest{{Kind: "read", Title: "a.txt"}, {Kind: "edit", Title: "b.txt"}}},
		{"a tool line without a title has an empty title", "tool: think",
			"tool: think", []demoagent.ToolRequest{{Kind: "think"}}},
		{"a tool line without a kind is text", "tool:\ntools: read x", "tool:", nil},
		{"the echo is cut at 200 characters", strings.Repeat("é", 250), strings.Repeat("é", 200), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			echo, tools := demoagent.ParsePrompt(tt.prompt)
			if echo != tt.wantEcho || !reflect.DeepEqual(tools, tt.wantTools) {
				t.Errorf("ParsePrompt(%q) = %q, %+v; want %q, %+v", tt.prompt, echo, tools, tt.wantEcho, tt.wantTools)
			}
		})
	}
}

func TestChunksConcatenateToTheText(t *testing.T) {
	for _, text := range []string{
		"",
		"one",
		"demo agent received: hi\ndemo agent: end of turn (0 tool requests).\n",
		"  leading and   inner   spaces, trailing  ",
		"naïve ünïcödé\u00a0words and\ttabs\n\nand blank lines",
	} {
		chunks := demoagent.Chunks(text)
		if got := strings.Join(chunks, ""); got != text {
			t.Errorf("Chunks(%q) joined = %q", text, got)
		}
		for _, c := range chunks {
			if c == "" {
				t.Errorf("Chunks(%q) has an empty chunk: %q", text, chunks)
			}
		}
	}
}
