package main

import (
	"fmt"
	"io"

	"github.com/acpflow/acpflow/workflows"
)

// validatePolicyFile checks file as a bare policy file when it is one
// (workflows.IsPolicyFile: no steps: or name:, and a top-level
// permission:, env: or sandbox:), with the loader --policy and `policy
// test` use, and prints `FILE: ok (policy file)`. handled is false for a
// workflow (or a file that cannot be read), which validate checks as one.
func validatePolicyFile(out io.Writer, file string) (handled bool, err error) {
	src, err := workflows.ReadFile(file, "workflow or policy file")
	if err != nil || !workflows.IsPolicyFile(src) {
		return false, nil
	}
	if _, err := workflows.LoadPolicyFile(file); err != nil {
		return true, err
	}
	fmt.Fprintf(out, "%s: ok (policy file)\n", file)
	return true, nil
}
