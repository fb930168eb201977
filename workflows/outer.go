package workflows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/acpflow/acpflow/policies"
)

// SystemPolicyFile is the organisation's outer policy file
// (docs/policies.md#the-outer-policy).
//
// # Notes
//
// It is a variable, not a constant, for two readers only: a packager whose
// system keeps configuration elsewhere sets it at link time (-ldflags "-X
// github.com/acpflow/acpflow/workflows.SystemPolicyFile=/opt/etc/acpflow/policy.yaml"),
// as internal/version.Version is set, and tests point it at a file of their
// own (in-process, or through -X for the binary the end-to-end tests build).
// Nothing acpflow reads at run time (no flag, no environment variable)
// changes it: whoever runs the binary cannot drop the system's policy
// without building another binary, which no setting could prevent.
var SystemPolicyFile = "/etc/acpflow/policy.yaml"

// PolicyEnv is the environment variable naming an outer policy file.
const PolicyEnv = "ACPFLOW_POLICY"

// OuterPolicyFile is one place an outer policy may be read from.
type OuterPolicyFile struct {
	Path string // absolute
	// From says where the path came from, in errors: "the system's", "the
	// user's", "$ACPFLOW_POLICY" or "--policy".
	From string
	// Named is set for a file the user named ($ACPFLOW_POLICY, --policy):
	// one that does not exist is a mistake, where a missing system or
	// user file is simply no layer.
	Named bool
}

// OuterPolicyFiles lists where the outer policy is read from, outermost
// first: SystemPolicyFile, the user's ($XDG_CONFIG_HOME/acpflow/policy.yaml,
// else ~/.config/acpflow/policy.yaml), $ACPFLOW_POLICY, then flag (the
// --policy value, "" for none). getenv reads the environment (os.Getenv).
// A path given twice is listed once, where it comes first.
func OuterPolicyFiles(flag string, getenv func(string) string) ([]OuterPolicyFile, error) {
	files := []OuterPolicyFile{{Path: SystemPolicyFile, From: "the system's"}}
	if dir := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		files = append(files, OuterPolicyFile{Path: filepath.Join(dir, "acpflow", "policy.yaml"), From: "the user's"})
	} else if home := getenv("HOME"); filepath.IsAbs(home) {
		files = append(files, OuterPolicyFile{Path: filepath.Join(home, ".config", "acpflow", "policy.yaml"), From: "the user's"})
	}
	for _, named := range []OuterPolicyFile{{Path: getenv(PolicyEnv), From: "$" + PolicyEnv}, {Path: flag, From: "--policy"}} {
		if named.Path == "" {
			continue
		}
		abs, err := filepath.Abs(named.Path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", named.From, named.Path, err)
		}
		named.Path, named.Named = abs, true
		files = append(files, named)
	}
	var out []OuterPolicyFile
	seen := map[string]bool{}
	for _, f := range files {
		f.Path = filepath.Clean(f.Path)
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// LoadOuterPolicy loads the outer policy (docs/policies.md#the-outer-policy):
// every file OuterPolicyFiles lists that exists, outermost first, each a
// bare policy file (LoadPolicyFile: a top-level permission: and/or env:,
// paths relative to the file). A missing system or user file is no layer;
// a missing named file, or any file that exists but cannot be read or does
// not load, is an error, with the file's positions: an outer policy that
// is there but broken must stop everything, never be skipped.
func LoadOuterPolicy(flag string, getenv func(string) string) (policies.Outer, error) {
	files, err := OuterPolicyFiles(flag, getenv)
	if err != nil {
		return nil, err
	}
	var outer policies.Outer
	for _, f := range files {
		if _, err := os.Stat(f.Path); errors.Is(err, fs.ErrNotExist) {
			if f.Named {
				return nil, fmt.Errorf("%s %s: no such file", f.From, f.Path)
			}
			continue
		}
		p, err := LoadPolicyFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("the outer policy (%s) does not load:\n%w", f.From, err)
		}
		outer = append(outer, policies.OuterPolicy{File: f.Path, Permission: p.Permission, Env: p.Env, SandboxRequired: p.SandboxRequired, Telemetry: p.Telemetry, Approvals: p.Approvals})
	}
	return outer, nil
}
