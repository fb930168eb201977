// Package formtest_test checks that a policy form and a step kind, each
// in a folder of its own that no shipped binary imports (listed,
// steps/steptest/askkind), register and run with no edit anywhere else:
// the workflow loader, the engine, the bundle's file list and the check
// of a policy given as text learn them from what they register.
package formtest_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/policies/formtest/listed"
	"github.com/acpflow/acpflow/steps/steptest/askkind"
	"github.com/acpflow/acpflow/workflows"
)

func TestMain(m *testing.M) {
	listed.Register()
	askkind.Register()
	os.Exit(m.Run())
}

// houseWorkflow asks the listed policy about two tool calls, one the list
// names, from steps of the test kind.
const houseWorkflow = `name: house
policies:
  permission:
    listed: allowed.txt
steps:
  - id: listed
    uses: ask
    with: {tool: read README}
  - id: unlisted
    uses: ask
    with: {tool: rm -rf /}
`

func writeHouse(t *testing.T, workflow string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "allowed.txt"), []byte("read_README\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "house.yaml")
	if err := os.WriteFile(path, []byte(workflow), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestATestFormAndKindRegisterAndRun(t *testing.T) {
	wf, err := workflows.Load(writeHouse(t, houseWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wf.Modules, []string{"allowed.txt"}) {
		t.Errorf("the files the workflow needs = %v; want the form's file, allowed.txt", wf.Modules)
	}
	res := engine.Run(context.Background(), wf, engine.Options{Workspace: t.TempDir()})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s: %s", res.Status, res.Error)
	}
	for step, want := range map[string]string{"listed": "allow", "unlisted": "reject"} {
		if got := res.Steps[step].Output; got != want {
			t.Errorf("step %s: the listed form decided %q; want %q", step, got, want)
		}
	}
}

// TestATestFormIsCheckedLikeAShippedOne: the loader's messages about a
// form's mapping (its keys, what goes with it, its file) come from what the
// form declares, with file:line:col.
func TestATestFormIsCheckedLikeAShippedOne(t *testing.T) {
	for _, tc := range []struct{ name, policy, want string }{
		{"a typo of its key", "    lsted: allowed.txt\n", `house.yaml:4:12: permission.lsted: unknown key "lsted"; did you mean "listed"?`},
		{"with rules", "    listed: allowed.txt\n    default: allow\n", `house.yaml:5:14: permission.default: cannot go with listed: a listed policy decides alone`},
		{"limits, which it does not take", "    listed: allowed.txt\n    limits: {memory: 1MiB}\n", `house.yaml:5:13: permission.limits: unknown key "limits"`},
		{"a missing file", "    listed: nowhere.txt\n", `house.yaml:4:13: permission.listed: read the list: open `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(houseWorkflow, "    listed: allowed.txt\n", tc.policy, 1)
			_, err := workflows.Load(writeHouse(t, src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want one that says %q", err, tc.want)
			}
		})
	}
}

// TestATestFormsFileIsRefusedInText: a policy given as text (the UI's
// what-if page) opens no file, the test form's included.
func TestATestFormsFileIsRefusedInText(t *testing.T) {
	_, err := workflows.ParsePolicyText("sent", []byte("permission:\n  listed: /etc/passwd\n"))
	want := "sent:2:11: permission.listed: a policy given as text cannot load a module file; test a listed policy with acpflow policy test POLICY_FILE"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v; want %q", err, want)
	}
	if got := policies.PermissionSpecKeys(); !slices.Contains(got, listed.Key) {
		t.Errorf("permission keys %v lack the form's", got)
	}
}

// TestTheSchemaHasTheTestFormAndKind: acpflow schema, which editors load,
// composes what the form and the kind declare.
func TestTheSchemaHasTheTestFormAndKind(t *testing.T) {
	raw, err := workflows.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Definitions map[string]struct {
			OneOf []struct {
				Required []string `json:"required"`
			} `json:"oneOf"`
			Properties map[string]any `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	var alternatives [][]string
	for _, alt := range s.Definitions["permission"].OneOf {
		alternatives = append(alternatives, alt.Required)
	}
	if !slices.ContainsFunc(alternatives, func(r []string) bool { return slices.Equal(r, []string{listed.Key}) }) {
		t.Errorf("permission alternatives require %v; want one that requires listed", alternatives)
	}
	if _, ok := s.Definitions["env"].Properties[listed.Key]; !ok {
		t.Errorf("env properties lack listed")
	}
	if _, ok := s.Definitions[askkind.Name]; !ok {
		t.Errorf("the schema has no definition of the ask kind's with:")
	}
}

// TestNoShippedBinaryLinksTheTestFormOrKind: they are registered by test
// binaries only.
func TestNoShippedBinaryLinksTheTestFormOrKind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/acpflow/acpflow/cmd/acpflow").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range []string{"policies/formtest", "steps/steptest/askkind"} {
		if strings.Contains(string(out), pkg) {
			t.Errorf("cmd/acpflow links %s", pkg)
		}
	}
}
