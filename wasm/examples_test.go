package wasm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/wasm"
)

// builtExamples are the modules examples/build.sh makes.
var builtExamples = []string{"go", "c", "c-reactor", "rust", "assemblyscript", "wat"}

// exampleModules lists every example module to test: examples/out (built
// first if any is missing) and examples/prebuilt. It skips only when
// nothing can be built and nothing is prebuilt.
func exampleModules(t *testing.T) []string {
	t.Helper()
	for _, name := range builtExamples {
		if _, err := os.Stat(filepath.Join("examples", "out", name+".wasm")); err != nil {
			buildExamples(t)
			break
		}
	}
	var modules []string
	for _, dir := range []string{"out", "prebuilt"} {
		found, _ := filepath.Glob(filepath.Join("examples", dir, "*.wasm"))
		modules = append(modules, found...)
	}
	if len(modules) == 0 {
		t.Skip("no example modules: examples/build.sh could not build them (toolchains missing) and examples/prebuilt is empty")
	}
	return modules
}

func buildExamples(t *testing.T) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Log("bash not found: not building the examples")
		return
	}
	cmd := exec.Command(bash, filepath.Join("examples", "build.sh"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("examples/build.sh failed (%v); testing what was built and examples/prebuilt:\n%s", err, out)
	}
}

// strictCase is one file of examples/testdata/strict: a request, a line
// "---", and the answer, or "error" when the module must fail.
type strictCase struct {
	name    string
	kind    string
	request []byte
	answer  string // canonical JSON, or "" for an error
}

func strictCases(t *testing.T) []strictCase {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("examples", "testdata", "strict", "*.txt"))
	if len(files) < 12 {
		t.Fatalf("found %d cases in examples/testdata/strict, want at least 12", len(files))
	}
	var cases []strictCase
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		request, answer, ok := strings.Cut(string(text), "\n---\n")
		if !ok {
			t.Fatalf("%s: no --- line between the request and the answer", file)
		}
		var head struct{ Kind string }
		if err := json.Unmarshal([]byte(request), &head); err != nil {
			t.Fatalf("%s: request: %v", file, err)
		}
		c := strictCase{name: strings.TrimSuffix(filepath.Base(file), ".txt"), kind: head.Kind, request: []byte(request)}
		if answer = strings.TrimSpace(answer); answer != "error" {
			c.answer = canonical(t, []byte(answer))
		}
		cases = append(cases, c)
	}
	return cases
}

// canonical decodes and re-encodes JSON: members sorted, escapes
// normalised, numbers kept as written.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

func TestEveryExampleGivesTheSameAnswers(t *testing.T) {
	modules := exampleModules(t)
	cases := strictCases(t)
	h := newHost(t)
	for _, path := range modules {
		label := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
		t.Run(label, func(t *testing.T) {
			m := load(t, h, path, wasm.Limits{})
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					answer, stderr, err := m.Call(context.Background(), c.kind, c.request)
					switch {
					case c.answer == "" && err == nil:
						t.Errorf("answered %s to a malformed request, want an error", answer)
					case c.answer == "":
						// failing closed, the way the README says: exit 1 or a trap
						if msg := err.Error(); !strings.Contains(msg, "exited with code 1") && !strings.Contains(msg, "trapped:") {
							t.Errorf("error: %v, want exit code 1 or a trap", err)
						}
					case err != nil:
						t.Errorf("error: %v\nstderr: %s", err, stderr)
					default:
						if got := canonical(t, answer); got != c.answer {
							t.Errorf("answer\n got: %s\nwant: %s", got, c.answer)
						}
					}
				})
			}
		})
	}
}

func TestPrebuiltExamplesAreComplete(t *testing.T) {
	for _, name := range builtExamples {
		path := filepath.Join("examples", "prebuilt", name+".wasm")
		info, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s is missing: run examples/build.sh and copy out/ to prebuilt/", path)
			continue
		}
		if info.Size() > 4<<20 {
			t.Errorf("%s is %d bytes, over the 4 MiB a committed module may have", path, info.Size())
		}
	}
}
