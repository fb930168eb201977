package main

// Shell steps and secrets (docs/shell.md#expressions-in-run,
// docs/shell.md#secrets) through the binary: an earlier step's output in
// a command line is data, never code; places where it could be code are
// refused before anything runs; a secret the command prints is recorded
// nowhere.

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// injections are outputs an agent may answer with that are shell code if
// a command line pastes them in.
var injections = []string{
	`'; touch PWNED; echo '`,
	`$(touch PWNED)`,
	"`touch PWNED`",
	`"; touch PWNED; "`,
	"first line\ntouch PWNED\n",
	`$HOME`,
	`*`,
	`a  b`,
}

// assertNoFile fails the test if a file named name exists anywhere under
// dir: the injected command ran.
func assertNoFile(t *testing.T, dir, name string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			t.Errorf("%s exists: a value ran as shell code", p)
		}
		return nil
	})
}

// TestShellExpressionsReachTheCommandAsData covers values that are shell
// code if pasted (class: quotes, $( ), backquotes, newlines, a variable,
// a glob, blanks), from a shell step and from an agent, placed bare, in
// double quotes, glued to a word and as several arguments: the command
// receives each verbatim, as one word, and no code in it runs.
func TestShellExpressionsReachTheCommandAsData(t *testing.T) {
	for _, payload := range injections {
		t.Run(payload, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "decoy"), nil, 0o644) // what a pasted * would match
			r := runShellWorkflow(t, dir, `name: inject
steps:
  - id: gen
    run: printf '%s' "$P"
    env: {P: `+yamlString(payload)+`}
  - id: use
    needs: gen
    run: |
      printf '<%s>' ${{ steps.gen.output }}
      printf '<%s>' "${{ steps.gen.output }}"
      printf '<%s>' x${{ steps.gen.output }}y "a ${{ steps.gen.output }}"
`, "--state", filepath.Join(dir, "state.db"))
			assertNoFile(t, dir, "PWNED")
			want := "<" + payload + "><" + payload + "><x" + payload + "y><a " + payload + ">"
			if r.code != 0 || r.res.Steps["use"].Output != want {
				t.Errorf("exit %d, output %q\nwant %q\nstderr: %s", r.code, r.res.Steps["use"].Output, want, r.stderr)
			}
		})
	}
	t.Run("from an agent", func(t *testing.T) {
		dir := t.TempDir()
		r := runShellWorkflow(t, dir, `name: inject
agents: {demo: {builtin: demo}}
steps:
  - id: review
    uses: acp-subagent
    with: {agent: demo, prompt: "'; touch PWNED; echo '$(touch PWNED)"}
  - id: use
    needs: review
    run: printf '<%s>' ${{ steps.review.output }} "${{ steps.review.output }}"
`, "--state", filepath.Join(dir, "state.db"))
		assertNoFile(t, dir, "PWNED")
		review, _ := r.res.Steps["review"].Output.(string)
		if r.code != 0 || !strings.Contains(review, "touch PWNED") || r.res.Steps["use"].Output != "<"+review+"><"+review+">" {
			t.Errorf("exit %d, review %q, use %q\nstderr: %s", r.code, review, r.res.Steps["use"].Output, r.stderr)
		}
	})
}

// TestShellExpressionsWhereTheShellWouldReadCodeAreRefused covers the
// places a value cannot be passed as data (class: single quotes, a
// here-document's delimiter, a quoted delimiter's body, arithmetic, a
// comment, a shell acpflow does not parse, a YAML string with escapes):
// validate and run both exit 2 before anything starts, each error at the
// expression's line and column with the fix.
func TestShellExpressionsWhereTheShellWouldReadCodeAreRefused(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, `name: refused
steps:
  - id: first
    run: touch RAN
  - id: quoted
    needs: first
    run: echo '${{ steps.first.output }}'
  - id: delimiter
    needs: first
    run: |
      cat <<${{ steps.first.output }}
      x
  - id: body
    needs: first
    run: |
      cat <<'EOF'
      got ${{ steps.first.output }}
      EOF
  - id: arith
    needs: first
    run: echo $(( ${{ steps.first.output }} + 1 ))
  - id: comment
    needs: first
    run: "true # ${{ steps.first.output }}"
  - id: python
    needs: first
    shell: python3
    run: print("${{ steps.first.output }}")
  - id: escaped
    needs: first
    run: "echo \"ok\"; echo '${{ steps.first.output }}'"
`)
	want := []string{
		`wf.yaml:7:16: step "quoted": run: ${{ steps.first.output }} is inside single quotes`,
		`use double quotes: "${{ steps.first.output }}"`,
		`wf.yaml:11:13: step "delimiter": run: ${{ steps.first.output }} is a here-document's delimiter`,
		`wf.yaml:17:11: step "body": run: ${{ steps.first.output }} is in the body of a here-document whose delimiter is quoted`,
		`wf.yaml:21:19: step "arith": run: ${{ steps.first.output }} is in an arithmetic expression`,
		`wf.yaml:24:18: step "comment": run: ${{ steps.first.output }} is in a comment`,
		`wf.yaml:28:10: step "python": run: a ${{ }} can reach the shell as data only in a bash or sh command line`,
		`wf.yaml:31:30: step "escaped": run: ${{ steps.first.output }} is inside single quotes`,
	}
	for _, args := range [][]string{{"validate", "wf.yaml"}, {"run", "wf.yaml", "--state", filepath.Join(dir, "state.db")}} {
		r := acpflow(t, dir, args...)
		if r.code != 2 {
			t.Errorf("%s: exit %d; want 2\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout+r.stderr, w) {
				t.Errorf("%s does not say %q:\n%s%s", args[0], w, r.stdout, r.stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "RAN")); err == nil {
			t.Fatalf("%s ran a step of a refused workflow", args[0])
		}
	}
}

// TestShellStepSecretsAreRecordedNowhere covers the records of a failed
// shell step that printed a token it was given through env: and in its
// command line, to stdout and stderr (class: the --output file, show
// --json, show, the store's files byte for byte, the terminal): none holds
// the token, and the result shows where it was.
func TestShellStepSecretsAreRecordedNowhere(t *testing.T) {
	const token = "dpl-s3cret-token-4821"
	dir := t.TempDir()
	t.Setenv("DEPLOY_TOKEN", token)
	state := filepath.Join(dir, "state.db")
	r := runShellWorkflow(t, dir, `name: deploy
steps:
  - id: deploy
    env: {T: "${{ env.DEPLOY_TOKEN }}"}
    run: |
      echo "deploying with $T"
      echo "auth failed for $T" >&2
      echo "again ${{ env.DEPLOY_TOKEN }}" >&2
      exit 4
`, "--state", state)
	if r.code != 1 || r.res.Steps["deploy"].Status != "failed" {
		t.Fatalf("exit %d, status %s; want a failed step\n%s", r.code, r.res.Steps["deploy"].Status, r.stderr)
	}
	if out := r.res.Steps["deploy"].Output; out != "deploying with [redacted]\n" {
		t.Errorf("output %q; want the token shown as [redacted]", out)
	}
	if e := r.res.Steps["deploy"].Error; !strings.Contains(e, "auth failed for [redacted]") || !strings.Contains(e, "again [redacted]") {
		t.Errorf("error %q; want the stderr tail with the token shown as [redacted]", e)
	}
	result, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	records := map[string]string{
		"the result JSON": string(result),
		"the terminal":    r.stdout + r.stderr,
		"show --json":     acpflow(t, dir, "show", r.res.RunID, "--json", "--state", state).stdout,
		"show":            acpflow(t, dir, "show", r.res.RunID, "--state", state).stdout,
	}
	files, _ := filepath.Glob(state + "*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		records[f] = string(b)
	}
	if len(files) == 0 {
		t.Fatal("no store file under " + state)
	}
	for where, text := range records {
		if strings.Contains(text, token) {
			t.Errorf("%s holds the token", where)
		}
	}
}
