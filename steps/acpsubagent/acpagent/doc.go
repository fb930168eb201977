// Package acpagent is the vocabulary of the acp-subagent kind: what acpflow
// knows of the ACP agents it drives, apart from the code that drives them
// (package acpsubagent, the process, client and teardown).
//
// It holds the agent presets (`preset: NAME`) and the session modes in
// which an agent decides alone (DecidesAlone); the rules of an agent's
// configuration (Check) and the decoding of its mapping in `agents:`
// (DecodeAgent, through the loader's steps.AgentBlock), `mcp-servers:`,
// `max-output:` and `config:` included; the step updates the
// kind emits (spawned, session, agent_message_chunk, teardown, …); and
// FromACP, which makes a policy's input of an ACP permission request.
//
// # Notes
//
// The step contract (package steps) keeps what every kind shares: the
// kind, invocation, result, events every step emits, processes, scope,
// field errors and registry, and the workflow's agents as the loader hands
// them to a kind (steps.Agent and the values it holds). The workflow
// loader imports this package to read an agent; policies, steps and the
// engine do not, so they link no ACP SDK.
package acpagent
