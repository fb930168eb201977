package acpflow_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path every package of acpflow is under.
const module = "github.com/acpflow/acpflow/"

// productPackages are acpflow's own layers (DESIGN.md "The house"): what
// internal/ packages, the decisions leaf and any helper below them must
// not import, so that a product package can use any of them.
var productPackages = []string{"engine", "steps", "policies", "runs", "workflows", "ui", "cli", "standard", "wasm"}

// goList runs `go list -f format patterns…` in the module and returns its
// lines, each "importpath: imports…".
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", patterns, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", patterns, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// importsOf maps each package `go list` names to what it imports, each
// once (imports is a template of space-separated paths).
func importsOf(t *testing.T, imports string, patterns ...string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, line := range goList(t, "{{.ImportPath}}:"+imports, patterns...) {
		pkg, list, _ := strings.Cut(line, ":")
		imports := strings.Fields(list)
		slices.Sort(imports)
		got[pkg] = slices.Compact(imports)
	}
	return got
}

// isProduct reports whether path is one of productPackages or below one.
func isProduct(path string) bool {
	rest, ok := strings.CutPrefix(path, module)
	if !ok {
		return false
	}
	top, _, _ := strings.Cut(rest, "/")
	return slices.Contains(productPackages, top)
}

// Covers issue 41: no internal/ package (nor its tests) imports a product
// package; shared data sits in a leaf (decisions), which imports nothing
// of acpflow at all.
func TestInternalImportsNoProductPackage(t *testing.T) {
	all := "{{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}"
	for pkg, imports := range importsOf(t, all, "./internal/...") {
		for _, imp := range imports {
			if isProduct(imp) {
				t.Errorf("%s imports %s: internal/ packages are below the product packages %v", pkg, imp, productPackages)
			}
		}
	}
	for pkg, imports := range importsOf(t, "{{join .Imports \" \"}}", "./decisions/...") {
		for _, imp := range imports {
			if strings.HasPrefix(imp, module) {
				t.Errorf("%s imports %s: the decisions leaf imports nothing of acpflow", pkg, imp)
			}
		}
	}
}

// Covers issue 41: the commands and the UI reach the run store only
// through runs (its Service and the types it names), never runs/store.
func TestCommandsAndUINameNoRunStore(t *testing.T) {
	for pkg, imports := range importsOf(t, "{{join .Imports \" \"}}", "./cmd/...", "./ui/...", "./cli/...") {
		if slices.Contains(imports, module+"runs/store") {
			t.Errorf("%s imports %sruns/store: name what it needs through runs", pkg, module)
		}
	}
}

// Covers issue 41: runs prints nothing and links no command line: no
// package under runs/ has cobra among its dependencies (the run command
// and its views are cli's); nor has the web UI, which words what it shows
// with cli/words.
func TestRunsAndTheUILinkNoCobra(t *testing.T) {
	for _, pattern := range []string{"./runs/...", "./ui/..."} {
		for pkg, imports := range importsOf(t, "{{join .Imports \" \"}}", "-deps", pattern) {
			if slices.Contains(imports, "github.com/spf13/cobra") {
				t.Errorf("%s links cobra: %s, among its dependencies, imports it; the command line belongs in cli", pattern, pkg)
			}
		}
	}
}
