package main

// What a client must bound: permission requests too large to show a
// policy, a flood of them at once, and stdout lines that are not JSON.
//
//	-permission-size FIELD=N  during the prompt, after the -permission ones, ask one
//	                          session/request_permission (tool call "size_FIELD", kind execute,
//	                          title "echo size") with one field grown: title, command
//	                          (rawInput.command), raw_input (a rawInput "content" string), path
//	                          (one location) of N bytes, or locations, options of N entries;
//	                          repeatable, in order; adds "permission size FIELD=N: OUTCOME\n"
//	-permission-flood N       during the prompt, after those, ask N permission requests at once
//	                          (tool calls "flood_1" … "flood_N", kind execute, title "echo K"),
//	                          not waiting for one answer before sending the next, then wait for
//	                          every answer; adds "flood: OUTCOME COUNT, …\n" (sorted by outcome)
//	-banner TEXT              write TEXT as a line to stdout at startup, before reading anything
//	                          (repeatable): what some programs print before they speak ACP
//	-stdout-line TEXT         at the start of each prompt, write TEXT as a line to stdout as it
//	                          is (repeatable, in order): a line that is not JSON-RPC mid-turn
//	-stdout-long N            at the start of each prompt, after those, write the line
//	                          "Traceback " and N bytes of "x" (longer than a flag can be)

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// boundsScript is the part of the config this file reads.
type boundsScript struct {
	sizes      sizeList
	flood      int
	banner     listFlag
	stdoutLine listFlag
	stdoutLong int
}

// sizeField is one -permission-size FIELD=N.
type sizeField struct {
	field string
	n     int
}

var sizeFields = []string{"title", "command", "raw_input", "path", "locations", "options"}

type sizeList []sizeField

func (l *sizeList) String() string { return fmt.Sprint(*l) }
func (l *sizeList) Set(v string) error {
	field, n, ok := strings.Cut(v, "=")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size < 0 || !slices.Contains(sizeFields, field) {
		return fmt.Errorf("want FIELD=N, FIELD one of %s", strings.Join(sizeFields, ", "))
	}
	*l = append(*l, sizeField{field, size})
	return nil
}

func addBoundsFlags(fs *flag.FlagSet, s *boundsScript) {
	fs.Var(&s.sizes, "permission-size", "FIELD=N: ask one permission with a field of N bytes or entries (repeatable)")
	fs.IntVar(&s.flood, "permission-flood", 0, "ask this many permissions at once during the prompt")
	fs.Var(&s.banner, "banner", "a line to write to stdout at startup (repeatable)")
	fs.Var(&s.stdoutLine, "stdout-line", "a line to write to stdout as it is at the start of each prompt (repeatable)")
	fs.IntVar(&s.stdoutLong, "stdout-long", 0, `write "Traceback " and this many "x" as a line at the start of each prompt`)
}

// writeBanner writes the -banner lines.
func (a *agent) writeBanner() {
	for _, line := range a.cfg.bounds.banner {
		a.wire.raw(line)
	}
}

// writeStdoutLines writes the -stdout-line lines of a prompt.
func (a *agent) writeStdoutLines() {
	for _, line := range a.cfg.bounds.stdoutLine {
		a.wire.raw(line)
	}
	if n := a.cfg.bounds.stdoutLong; n > 0 {
		a.wire.raw("Traceback " + strings.Repeat("x", n))
	}
}

// raw writes line and a newline to stdout as it is, in one piece.
func (w *wire) raw(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write([]byte(line + "\n")); err != nil {
		w.rec.event("stdout_error", map[string]any{"error": err.Error()})
	}
}

// askBounds asks the -permission-size and -permission-flood requests of a
// turn; false when the turn was cancelled first.
func (a *agent) askBounds(t *turn) bool {
	for _, s := range a.cfg.bounds.sizes {
		outcome, ok := a.askPermission(t, 0, toolRequest{raw: sizedRequest(s, a.cfg.permOptions)})
		if !ok {
			return false
		}
		a.chunk(t.sessionID, fmt.Sprintf("permission size %s=%d: %s\n", s.field, s.n, outcome))
	}
	if n := a.cfg.bounds.flood; n > 0 {
		summary, ok := a.flood(t, n)
		if !ok {
			return false
		}
		a.chunk(t.sessionID, "flood: "+summary+"\n")
	}
	return true
}

// flood asks n permissions at once and sums up their outcomes.
func (a *agent) flood(t *turn, n int) (string, bool) {
	outcomes := make([]string, n)
	var wg sync.WaitGroup
	cancelled := false
	var mu sync.Mutex
	for i := range n {
		params := map[string]any{"toolCall": map[string]any{
			"toolCallId": fmt.Sprintf("flood_%d", i+1), "kind": "execute", "title": fmt.Sprintf("echo %d", i+1),
			"status": "pending", "rawInput": map[string]any{"command": fmt.Sprintf("echo %d", i+1)},
		}, "options": options(a.cfg.permOptions)}
		raw, _ := json.Marshal(params)
		wg.Go(func() {
			outcome, ok := a.askPermission(t, 0, toolRequest{raw: raw})
			mu.Lock()
			outcomes[i], cancelled = outcome, cancelled || !ok
			mu.Unlock()
		})
	}
	wg.Wait()
	if cancelled {
		return "", false
	}
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o]++
	}
	var parts []string
	for _, o := range slices.Sorted(func(yield func(string) bool) {
		for o := range counts {
			if !yield(o) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s %d", o, counts[o]))
	}
	return strings.Join(parts, ", "), true
}

// sizedRequest is the params of a -permission-size request.
func sizedRequest(s sizeField, kinds []string) json.RawMessage {
	big := strings.Repeat("x", s.n)
	tool := map[string]any{"toolCallId": "size_" + s.field, "kind": "execute", "title": "echo size",
		"status": "pending", "rawInput": map[string]any{"command": "echo size"}}
	opts := options(kinds)
	switch s.field {
	case "title":
		tool["title"] = big
	case "command":
		tool["rawInput"] = map[string]any{"command": "echo " + big}
	case "raw_input":
		tool["rawInput"] = map[string]any{"command": "echo size", "content": big}
	case "path":
		tool["locations"] = []any{map[string]any{"path": "/" + big}}
	case "locations":
		locs := make([]any, s.n)
		for i := range locs {
			locs[i] = map[string]any{"path": fmt.Sprintf("/tmp/f%d", i)}
		}
		tool["locations"] = locs
	case "options":
		for i := range s.n {
			opts = append(opts, map[string]any{"optionId": fmt.Sprintf("extra-%d", i), "name": "Extra", "kind": "reject_once"})
		}
	}
	raw, _ := json.Marshal(map[string]any{"toolCall": tool, "options": opts})
	return raw
}

// options are the permission options of these kinds, as -permission asks.
func options(kinds []string) []any {
	out := []any{}
	for _, kind := range kinds {
		out = append(out, map[string]any{
			"optionId": "opt-" + strings.ReplaceAll(kind, "_", "-"),
			"name":     optionName(kind),
			"kind":     kind,
		})
	}
	return out
}
