package main

// The cookbook's recipes (docs/cookbook.md), run as a reader runs them: the
// ```sh blocks of each recipe's section, verbatim, through bash, with the
// acpflow under test first on PATH, from a directory laid out as the root
// of a checkout (workflows/ is the repository's), on the demo agent. Each
// test then checks the outcome its recipe describes. ```console blocks are
// shown output, not run.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recipeScripts are the ```sh blocks of the cookbook section whose heading
// starts with prefix (the recipe's number, "1.").
func recipeScripts(t *testing.T, prefix string) []string {
	t.Helper()
	var scripts []string
	for _, b := range readMarkdown(t, "docs/cookbook.md").blocks {
		if strings.HasPrefix(b.section, prefix) && b.lang == "sh" && !b.fragment() {
			scripts = append(scripts, b.text)
		}
	}
	if len(scripts) == 0 {
		t.Fatalf("docs/cookbook.md has no ```sh block under a heading %q", prefix)
	}
	return scripts
}

// recipeDir is a directory laid out as a checkout's root for the recipes:
// workflows/ is the repository's, the rest is the test's.
func recipeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "workflows"), filepath.Join(dir, "workflows")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFiles writes files (path relative to dir: content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runScript runs a recipe's block with bash in dir, with the acpflow under
// test first on PATH and a run store of the directory's own, and returns its
// exit code and its stdout and stderr together.
func runScript(t *testing.T, dir, script string) (int, string) {
	t.Helper()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1",
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ACPFLOW_STATE="+filepath.Join(dir, "state.db"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

// needTools skips a recipe whose commands use a tool this machine lacks.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the recipe uses %s, which is not installed", tool)
		}
	}
}

// needShellSteps skips a recipe whose workflow has a shell step only while
// the binary does not know the kind yet (acpflow validate calls `run`
// unknown); any other validation error fails the test.
func needShellSteps(t *testing.T, workflow string) {
	t.Helper()
	r := acpflow(t, recipeDir(t), "validate", workflow)
	switch {
	case r.code == 0:
	case strings.Contains(r.stderr, `unknown key "run"`) || strings.Contains(r.stderr, `unknown uses "shell"`):
		t.Skipf("the shell step kind (steps/shell, `run:`) is not built yet:\n%s", r.stderr)
	default:
		t.Fatalf("acpflow validate %s: exit %d\n%s", workflow, r.code, r.stderr)
	}
}

// resultLines decodes a --output file: one JSON object per line.
func resultLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s line %d is not JSON: %v\n%s", path, i+1, err, line)
		}
		lines = append(lines, m)
	}
	return lines
}

// stepOf is one step's result in a result line.
func stepOf(t *testing.T, res map[string]any, id string) map[string]any {
	t.Helper()
	steps, _ := res["steps"].(map[string]any)
	s, ok := steps[id].(map[string]any)
	if !ok {
		t.Fatalf("the result has no step %q: %v", id, res)
	}
	return s
}

// goModule is a Go module whose one test passes or fails.
func goModule(pass bool) map[string]string {
	want := "3"
	if !pass {
		want = "4"
	}
	return map[string]string{
		"mymodule/go.mod": "module example.com/mymodule\n\ngo 1.22\n",
		"mymodule/add.go": "package mymodule\n\nfunc Add(a, b int) int { return a + b }\n",
		"mymodule/add_test.go": "package mymodule\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n" +
			"\tif got := Add(1, 2); got != " + want + " {\n\t\tt.Fatalf(\"Add(1, 2) = %d\", got)\n\t}\n}\n",
	}
}

func TestCookbookReviewFixTestGate(t *testing.T) {
	needTools(t, "go")
	needShellSteps(t, "workflows/examples/cookbook/review-fix-test.yaml")
	scripts := recipeScripts(t, "1.")

	t.Run("tests that pass: exit 0, no second fix, no gate", func(t *testing.T) {
		dir := recipeDir(t)
		writeFiles(t, dir, goModule(true))
		code, out := runScript(t, dir, scripts[0])
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s", code, out)
		}
		res := resultLines(t, filepath.Join(dir, "results.json"))
		if len(res) != 1 || res[0]["status"] != "succeeded" {
			t.Fatalf("results: %v", res)
		}
		test := stepOf(t, res[0], "test")
		if test["status"] != "succeeded" || test["exit_code"] != 0.0 || !strings.Contains(test["output"].(string), "ok") {
			t.Errorf("the test step: %v", test)
		}
		for _, id := range []string{"fix_again", "gate"} {
			if s := stepOf(t, res[0], id); s["status"] != "skipped" {
				t.Errorf("%s: %v, want skipped", id, s)
			}
		}
	})

	t.Run("tests that fail: the failure goes to fix_again, the gate fails the run", func(t *testing.T) {
		dir := recipeDir(t)
		writeFiles(t, dir, goModule(false))
		code, out := runScript(t, dir, scripts[0])
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, out)
		}
		res := resultLines(t, filepath.Join(dir, "results.json"))
		if len(res) != 1 || res[0]["status"] != "failed" {
			t.Fatalf("results: %v", res)
		}
		test := stepOf(t, res[0], "test")
		if test["status"] != "failed" || test["exit_code"] != 1.0 || !strings.Contains(test["output"].(string), "--- FAIL: TestAdd") {
			t.Errorf("the test step: %v", test)
		}
		again := stepOf(t, res[0], "fix_again")
		if again["status"] != "succeeded" || !strings.Contains(again["output"].(string), "--- FAIL: TestAdd") {
			t.Errorf("fix_again did not get the failure in its prompt: %v", again)
		}
		if gate := stepOf(t, res[0], "gate"); gate["status"] != "failed" || gate["exit_code"] != 1.0 {
			t.Errorf("the gate: %v", gate)
		}
	})
}

func TestCookbookBatchOverFiles(t *testing.T) {
	needTools(t, "jq")
	scripts := recipeScripts(t, "2.")
	if len(scripts) != 2 {
		t.Fatalf("recipe 2 has %d sh blocks, want 2 (the batch, the for-each)", len(scripts))
	}
	files := []string{"docs/a.md", "docs/b.md", "docs/c.md"}
	dir := recipeDir(t)
	writeFiles(t, dir, map[string]string{files[0]: "# a\n", files[1]: "# b\n", files[2]: "# c\n"})

	t.Run("a batch: one run and one result line per file", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[0])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		var got []string
		for _, res := range resultLines(t, filepath.Join(dir, "reviews.jsonl")) {
			file, _ := res["inputs"].(map[string]any)["file"].(string)
			got = append(got, file)
			review, _ := res["outputs"].(map[string]any)["review"].(string)
			if res["status"] != "succeeded" || !strings.Contains(review, "Review "+file) ||
				!strings.Contains(review, "permission read "+file+": allow-once") {
				t.Errorf("the run of %s: %v", file, res)
			}
			if !strings.Contains(out, "succeeded\t"+file+"\t") {
				t.Errorf("the jq summary lacks %s:\n%s", file, out)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, files) {
			t.Errorf("runs for %v, want one per file %v", got, files)
		}
	})

	t.Run("for-each: one run, a review per file in the list's order", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[1])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		r := acpflow(t, dir, "runs", "--state", filepath.Join(dir, "state.db"), "--workflow", "review-files-foreach", "--json")
		var run map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &run); err != nil || run["status"] != "succeeded" {
			t.Fatalf("runs --json: %v %s%s", err, r.stdout, r.stderr)
		}
		// An output that is not a string is rendered as JSON.
		var reviews []string
		text, _ := run["outputs"].(map[string]any)["reviews"].(string)
		if err := json.Unmarshal([]byte(text), &reviews); err != nil || len(reviews) != len(files) {
			t.Fatalf("reviews: %v", run["outputs"])
		}
		for i, file := range files {
			if s := reviews[i]; !strings.Contains(s, "Review "+file+" (file "+string(rune('1'+i))+" of 3)") {
				t.Errorf("review %d is %q, want %s's", i, s, file)
			}
		}
	})
}

func TestCookbookLockedDownPolicy(t *testing.T) {
	needTools(t, "jq")
	scripts := recipeScripts(t, "3.")
	if len(scripts) != 2 {
		t.Fatalf("recipe 3 has %d sh blocks, want 2 (the run, the env policy)", len(scripts))
	}
	dir := recipeDir(t)

	t.Run("rm is rejected and recorded with its rule", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[0])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		res := resultLines(t, filepath.Join(dir, "results.json"))
		perms, _ := stepOf(t, res[0], "tidy")["permissions"].([]any)
		var got []string
		for _, p := range perms {
			p := p.(map[string]any)
			got = append(got, strings.Join([]string{p["kind"].(string), p["title"].(string), p["decision"].(string), p["rule"].(string), p["reason"].(string)}, "|"))
		}
		want := []string{
			"read|Makefile|allow|1|",
			"execute|make clean && rm -rf build|reject|2|no rm, not even inside make && rm",
			"execute|go vet ./...|allow|3|",
			"edit|/etc/hosts|reject|default|",
		}
		if !slices.Equal(got, want) {
			t.Errorf("permissions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !strings.Contains(out, `["execute","make clean && rm -rf build","reject","2","no rm, not even inside make && rm"]`) {
			t.Errorf("the jq line of the rejected rm is missing:\n%s", out)
		}
	})

	t.Run("the env policy keeps the core and the named Go variables, no credential", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[1])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		var answer struct{ Env map[string]string }
		if err := json.Unmarshal([]byte(out), &answer); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		want := map[string]string{"GOCACHE": "/c", "HOME": "/home/ada", "PATH": "/usr/bin"}
		if len(answer.Env) != len(want) {
			t.Errorf("env = %v, want %v", answer.Env, want)
		}
		for k, v := range want {
			if answer.Env[k] != v {
				t.Errorf("env = %v, want %v", answer.Env, want)
			}
		}
	})
}

func TestCookbookCI(t *testing.T) {
	needTools(t, "jq", "gofmt")
	needShellSteps(t, "workflows/examples/cookbook/ci.yaml")
	script := recipeScripts(t, "4.")[0]

	t.Run("formatted code: exit 0, the result says succeeded", func(t *testing.T) {
		dir := recipeDir(t)
		writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
		code, out := runScript(t, dir, script)
		if code != 0 || !strings.Contains(out, "acpflow exited 0\nsucceeded\n") || !strings.Contains(out, "gate: succeeded\n") {
			t.Fatalf("exit %d\n%s", code, out)
		}
		res := resultLines(t, filepath.Join(dir, "results.json"))
		if gate := stepOf(t, res[0], "gate"); res[0]["status"] != "succeeded" || gate["exit_code"] != 0.0 {
			t.Errorf("result: %v", res[0])
		}
	})

	t.Run("an unformatted file: exit 1, the gate failed", func(t *testing.T) {
		dir := recipeDir(t)
		writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc  main() {  }\n"})
		code, out := runScript(t, dir, script)
		if code != 0 || !strings.Contains(out, "acpflow exited 1\nfailed\n") || !strings.Contains(out, "gate: failed\n") {
			t.Fatalf("exit %d\n%s", code, out)
		}
		res := resultLines(t, filepath.Join(dir, "results.json"))
		unformatted, _ := stepOf(t, res[0], "unformatted")["output"].(string)
		if gate := stepOf(t, res[0], "gate"); res[0]["status"] != "failed" || gate["exit_code"] != 1.0 || strings.TrimSpace(unformatted) != "main.go" {
			t.Errorf("result: %v", res[0])
		}
	})

	t.Run("an invalid input: exit 2, nothing started, no result written", func(t *testing.T) {
		dir := recipeDir(t)
		r := acpflow(t, dir, "run", "workflows/examples/cookbook/ci.yaml", "--output", "results.json", "--input", "nope=1")
		if r.code != 2 || !strings.Contains(r.stderr, "nope") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "results.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("results.json after an invalid input: %v", err)
		}
	})
}

func TestCookbookPolicyTestOnRecordedRuns(t *testing.T) {
	needTools(t, "jq")
	scripts := recipeScripts(t, "5.")
	if len(scripts) != 2 {
		t.Fatalf("recipe 5 has %d sh blocks, want 2 (from the store, from a file)", len(scripts))
	}
	dir := recipeDir(t)

	t.Run("from the run store: the loosened rule flips the recorded rm, exit 1", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[0])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		for _, want := range []string{
			` tidy: execute "make clean && rm -rf build": reject (workflow rule 2) → allow (workflow rule 2)` + "\n",
			"4 requests in 1 run: 1 changed, 3 unchanged\n",
			"policy test exited 1\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("from an exported file: the policy the run was made under changes nothing, exit 0", func(t *testing.T) {
		code, out := runScript(t, dir, scripts[1])
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if !strings.Contains(out, "4 requests in 1 run: 0 changed, 4 unchanged\n") || !strings.Contains(out, "policy test exited 0\n") {
			t.Errorf("output:\n%s", out)
		}
		if fi, err := os.Stat(filepath.Join(dir, "locked-down.transcript.json")); err != nil || fi.Size() == 0 {
			t.Errorf("the exported transcript: %v", err)
		}
	})
}

// An excerpt of a recipe's workflow on the page (```yaml fragment
// from=FILE) is the file's text, word for word, so that what a reader
// copies is what the tests ran.
func TestCookbookExcerptsAreTheFiles(t *testing.T) {
	n := 0
	for _, b := range readMarkdown(t, "docs/cookbook.md").blocks {
		for _, mark := range b.marks {
			name, ok := strings.CutPrefix(mark, "from=")
			if !ok {
				continue
			}
			n++
			src, err := os.ReadFile(filepath.Join(repoRoot(t), "workflows", "examples", "cookbook", name))
			if err != nil {
				t.Errorf("%s: %v", b.where(), err)
			} else if !strings.Contains(string(src), b.text) {
				t.Errorf("%s: the excerpt is not in workflows/examples/cookbook/%s as it stands:\n%s", b.where(), name, b.text)
			}
		}
	}
	if n == 0 {
		t.Fatal("docs/cookbook.md has no excerpt marked from=FILE")
	}
}
