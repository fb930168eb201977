// Package modelserver is a scripted model server for `acpflow agents verify`, acpflow's tests and
// benchmarks with real ACP agents (claude-agent-acp, codex-acp, gemini-cli).
// It speaks just enough of three model APIs for an agent to complete whole
// turns offline:
//
//   - Anthropic Messages: POST /v1/messages, streaming SSE (claude)
//   - OpenAI Responses: POST /v1/responses, streaming SSE (codex)
//   - Gemini: POST /v1beta/models/MODEL:streamGenerateContent?alt=sse and
//     :generateContent (gemini, including its router call)
//
// One Server serves one Script, the same for all three APIs. The reply to a
// request is chosen without server-side state: it is Script[n], where n is
// the number of tool results already in the request's conversation, so the
// agent's own retries and side requests (titles, routing) do not move the
// script along. A Cue (StartCued) answers a later prompt of a session from
// a script of its own, chosen by a text that prompt put in the
// conversation.
package modelserver

import "time"

// Reply is one scripted model turn. With Shell or Write set, the model says
// Say (if any) and then calls the agent's shell or file-writing tool; with
// neither, it answers Say and ends the turn.
type Reply struct {
	Say   string // text the model streams before its tool call, or its final answer
	Shell string // a command line for the agent's shell tool
	Write *Write // a file for the agent's write tool
	// Chunks splits Say into this many streamed deltas (default 1).
	Chunks int
	// Delay holds the reply back this long; Hang holds it until the client
	// goes away (for timeout and cancel scenarios).
	Delay time.Duration
	Hang  bool
	// Usage is the token usage the reply reports, in each API's own
	// fields; nil reports counts made up from the request's and the
	// reply's sizes.
	Usage *Usage
	// Plan, with neither Shell nor Write set, calls the agent's tool that
	// leaves plan mode with this plan (Claude Code's ExitPlanMode; the
	// Anthropic API only).
	Plan string
	// Error makes the server answer with an API error carrying this
	// message instead of the reply (the OpenAI Responses API only: HTTP
	// 500).
	Error string
	// Sandboxed (the OpenAI Responses API only) leaves out the shell
	// call's request to run outside codex's sandbox (sandbox_permissions
	// "require_escalated", which a model sends for a command that needs to
	// write), so that codex may run it in its sandbox without asking.
	Sandboxed bool
}

// Usage is what a reply says it cost, as the APIs report it: input
// tokens not read from a cache, output tokens, and cache reads and writes
// (Anthropic's cache_read_input_tokens and cache_creation_input_tokens;
// OpenAI's and Gemini's cached tokens are the reads, part of the input).
type Usage struct {
	Input, Output, CacheRead, CacheWrite int
}

// Write asks the agent to write Content to Path (absolute, or relative to
// the agent's cwd).
type Write struct {
	Path    string
	Content string
}

// Script is a conversation: Script[n] answers the request that carries n
// tool results. Past the end, the last reply is repeated.
type Script []Reply

// at returns the reply for a request that carries n tool results.
func (s Script) at(n int) Reply {
	if len(s) == 0 {
		return Reply{Say: "ok"}
	}
	return s[min(n, len(s)-1)]
}

// chunks splits text into n pieces of about equal length (at least one).
func chunks(text string, n int) []string {
	r := []rune(text)
	if n <= 1 || len(r) <= 1 {
		return []string{text}
	}
	n = min(n, len(r))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}
