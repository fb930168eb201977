// Package workflows is the workflow file: it loads a YAML workflow, keeping
// the line and column of every node, checks it strictly (unknown keys,
// types, references between steps, cycles, expressions), and hands the
// engine an engine.Workflow whose templates and expressions are already
// compiled. It also owns the file's JSON schema (for editors) and the
// conversion of `--input` values and JSONL batch lines to declared inputs.
//
// Everything a user can get wrong in a file is reported here, all at once
// and each at its position, so that `acpflow validate` catches it and a run
// never fails half-way on something a look at the file could have found.
package workflows
