package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite workflows/schema.json from the kinds acpflow imports")

// TestSchemaJSONIsWhatAcpflowPrints: workflows/schema.json, which editors
// load, is the schema `acpflow schema` composes from the step kinds this
// binary imports. After changing a kind's with: schema or the loader's
// schema-base.json, run go test ./cmd/acpflow -run SchemaJSON -update-schema.
func TestSchemaJSONIsWhatAcpflowPrints(t *testing.T) {
	got, err := workflows.Schema()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(repoRoot(t), "workflows", "schema.json")
	if *updateSchema {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("workflows/schema.json is not what acpflow schema prints; run go test ./cmd/acpflow -run SchemaJSON -update-schema and read the diff")
	}
}
