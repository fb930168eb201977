package workflows

import _ "embed"

// Schema is the JSON schema (draft-07) of the workflow file, for editors:
// a file that starts with
//
//	# yaml-language-server: $schema=https://raw.githubusercontent.com/acpflow/acpflow/main/workflows/schema.json
//
// (or a relative path to schema.json) gets completion, descriptions and
// checks of keys and types as it is typed.
//
// # Notes
//
// The schema can only check the shape of the file. References between
// steps, cycles in needs and expressions are checked by Parse, which is the
// authority: a file the schema accepts may still fail validation, never
// the other way round for the keys and types both check.
//
//go:embed schema.json
var Schema []byte
