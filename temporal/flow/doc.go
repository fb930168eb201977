// Package flow runs acpflow workflows on Temporal: one generic Temporal
// workflow (Interpret) schedules a compiled acpflow workflow's steps, and
// one activity (Activities.Attempt) runs one attempt of one step on a
// worker, with its policies, and tears its agent down as the CLI does.
//
// The workflow is deterministic: it never reads a file, the clock or the
// environment. It is given the workflow's Plan (its DAG and expressions as
// source) and evaluates if:, for-each: and outputs: from the results the
// activities recorded, with the engine's own functions (engine.SkipReason
// and the rest), so that a run decides here as it does on the CLI. The
// workflow file itself, and the WASM modules its policies load, travel to
// the workers by content hash through a blob store (Blobs); so does any
// result too large for a Temporal payload.
package flow
