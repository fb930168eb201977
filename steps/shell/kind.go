// Package shell is the shell step kind: it runs a command line in a shell,
// in a process group of its own, under the step's env policy, and tears the
// group down as an agent's is torn down, so that nothing the command
// started outlives the step (docs/shell.md). `run: COMMAND` on a step is
// the workflow file's shorthand for `uses: shell` with `with: {run:
// COMMAND}`, as in GitHub Actions.
//
// It is the second step kind, and imports no other kind: what it shares
// with acp-subagent (the process group and its teardown, the env policy,
// the sandbox) lives below both, in internal/procgroup, package policies
// and package confine.
package shell

import (
	_ "embed"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/confine"
	"github.com/acpflow/acpflow/steps/outputschema"
)

// Name is the `uses:` value of this kind.
const Name = "shell"

// Kind makes shell steps.
type Kind struct{}

var _ steps.Kind = Kind{}

func init() { steps.Register(Kind{}) }

// Name implements steps.Kind.
func (Kind) Name() string { return Name }

// Keys implements steps.Kind.
func (Kind) Keys() []string {
	return []string{"run", "shell", "env", "cwd", "sandbox", "output-schema"}
}

// Required implements steps.Kind.
func (Kind) Required() []string { return []string{"run"} }

//go:embed schema.json
var withSchema []byte

// Schema implements steps.Kind.
func (Kind) Schema() json.RawMessage { return withSchema }

// Prepare implements steps.Kind: it checks the shapes of the values, each
// error at its value. Messages name the key alone (`run`, `env.X`), since
// the same keys are written under with: or, with the run: shorthand, on
// the step itself; the loader's caret says where.
func (Kind) Prepare(cfg steps.StepConfig) (steps.Step, error) {
	s := &step{}
	switch v := cfg.With["run"].(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, steps.FieldErrorf(steps.WithPath("run"), "run is empty: give the command line to run, e.g. run: go test ./...")
		}
		s.run = v
	default:
		return nil, steps.FieldErrorf(steps.WithPath("run"), "run: want a command line (a string), got %s", steps.Describe(v))
	}
	if v, ok := cfg.With["shell"]; ok {
		text, isString := v.(string)
		if !isString {
			return nil, steps.FieldErrorf(steps.WithPath("shell"), "shell: want a shell such as bash, sh or python3, got %s", steps.Describe(v))
		}
		if !strings.Contains(text, "${{") {
			if _, err := parseShell(text); err != nil {
				return nil, steps.FieldErrorf(steps.WithPath("shell"), "shell: %w", err)
			}
		}
	}
	if err := s.placeable(cfg.With["shell"]); err != nil {
		return nil, err
	}
	if err := s.prepareEnv(cfg.With); err != nil {
		return nil, err
	}
	if v, ok := cfg.With["cwd"]; ok {
		if text, _ := v.(string); text == "" {
			return nil, steps.FieldErrorf(steps.WithPath("cwd"), "cwd: want a directory (relative to the workspace), got %s; omit the key to run in the workspace", steps.Describe(v))
		}
		s.cwdSet = true
		if text := v.(string); !strings.Contains(text, "${{") {
			s.cwd = text
		}
	}
	if v, ok := cfg.With["sandbox"]; ok {
		sb, err := confine.Parse(v)
		if err != nil {
			var fe *steps.FieldError
			if errors.As(err, &fe) {
				return nil, steps.FieldErrorf(steps.WithPath(append([]string{"sandbox"}, fe.Path...)...), "%w", fe.Err)
			}
			return nil, err
		}
		if sb != nil && sb.Network == steps.NetworkGateway {
			return nil, steps.FieldErrorf(steps.WithPath("sandbox", "network"), "sandbox.network: %s: a shell step has no model gateway to reach (only an agent with gateway: has one); use off for no network", steps.NetworkGateway)
		}
		s.sandbox, s.sandboxSet = sb, true
	}
	output, err := outputschema.Prepare(cfg.With, cfg.Dir, "stdout")
	if err != nil {
		return nil, err
	}
	s.output = output
	return s, nil
}

// prepareEnv checks with.env: a mapping of variable names to plain values,
// none of them acpflow's own.
func (s *step) prepareEnv(with map[string]any) error {
	v, ok := with["env"]
	if !ok {
		return nil
	}
	env, isMap := v.(map[string]any)
	if !isMap {
		return steps.FieldErrorf(steps.WithPath("env"), "env must be a mapping of names to values, got %s", steps.Describe(v))
	}
	s.env = env
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return steps.FieldErrorf(steps.WithPath("env", name), "env: %q is not a variable name (no =, not empty)", name)
		}
		if strings.HasPrefix(name, exprVar) {
			return steps.FieldErrorf(steps.WithPath("env", name), "env: %s… names are acpflow's: they carry the values of the ${{ }} in run:; rename it", exprVar)
		}
		switch x := env[name].(type) {
		case string, bool, int, int64, uint64, float64:
		default:
			return steps.FieldErrorf(steps.WithPath("env", name), "env.%s: want a string, number or boolean, got %s", name, steps.Describe(x))
		}
	}
	return nil
}

// placeable checks that every ${{ }} of the command line can reach the
// shell as data (expr.go), under the step's shell: a refusal is placed at
// the expression, with what to write instead.
func (s *step) placeable(shell any) error {
	if !strings.Contains(s.run, "${{") {
		return nil
	}
	text, _ := shell.(string)
	lang, ok := langOf(text)
	if !ok || strings.Contains(text, "${{") {
		return steps.FieldErrorf(steps.WithPath("run"), "run: a ${{ }} can reach the shell as data only in a bash or sh command line, and this one runs under shell: %s; set the value in env: (env: {V: ${{ … }}}) and read it from the environment ($V; os.environ[\"V\"] in python)", text)
	}
	_, err := placeExprs(s.run, lang)
	var ee *ExprError
	if errors.As(err, &ee) {
		return &steps.FieldError{Path: steps.WithPath("run"), Err: err, Excerpt: ee.Excerpt, Col: ee.Col}
	}
	if err != nil {
		return steps.FieldErrorf(steps.WithPath("run"), "run: %w", err)
	}
	return nil
}
