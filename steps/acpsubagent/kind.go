// Package acpsubagent is the acp-subagent step kind: it spawns an ACP agent
// in its own process group, drives it over ACP as the client (initialize,
// optional authenticate, session/new, one session/prompt), answers its
// permission requests through the step's policy, and tears it down so that
// nothing it started outlives the step (docs/acp-subagent.md).
package acpsubagent

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/confine"
)

// Name is the `uses:` value of this kind.
const Name = "acp-subagent"

// Kind makes acp-subagent steps.
type Kind struct {
	// Self and SelfArgs start acpflow's own builtin agents: Self is the
	// executable, SelfArgs the arguments before the builtin's name
	// (["agent"] for `acpflow agent demo`).
	Self     string
	SelfArgs []string
}

var _ steps.Kind = (*Kind)(nil)

func init() {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	steps.Register(&Kind{Self: self, SelfArgs: []string{"agent"}})
}

// Name implements steps.Kind.
func (k *Kind) Name() string { return Name }

// Keys implements steps.Kind.
func (k *Kind) Keys() []string {
	return []string{"agent", "prompt", "cwd", "env", "mode", "config", "max-output", "mcp-servers", "attach", "session", "fork", "output-schema", "schema-retries", "sandbox"}
}

// Required implements steps.Kind.
func (k *Kind) Required() []string { return []string{"agent", "prompt"} }

//go:embed schema.json
var withSchema []byte

// Schema implements steps.Kind.
func (k *Kind) Schema() json.RawMessage { return withSchema }

// Prepare implements steps.Kind. Its errors are *steps.FieldError at the
// with: value at fault.
func (k *Kind) Prepare(cfg steps.StepConfig) (steps.Step, error) {
	name, ok := cfg.With["agent"].(string)
	if !ok || name == "" {
		return nil, steps.FieldErrorf(steps.WithPath("agent"), "with.agent must name an agent")
	}
	agent, ok := cfg.Agents[name]
	if !ok {
		declared := make([]string, 0, len(cfg.Agents))
		for n := range cfg.Agents {
			declared = append(declared, n)
		}
		sort.Strings(declared)
		if len(declared) == 0 {
			return nil, steps.FieldErrorf(steps.WithPath("agent"), "with.agent: unknown agent %q (the workflow declares no agents:)", name)
		}
		return nil, steps.FieldErrorf(steps.WithPath("agent"), "with.agent: unknown agent %q (declared: %s)", name, strings.Join(declared, ", "))
	}
	if cwd, ok := cfg.With["cwd"]; ok {
		if s, _ := cwd.(string); s == "" {
			return nil, steps.FieldErrorf(steps.WithPath("cwd"), "with.cwd is empty; omit the key to use the agent's cwd or the workspace")
		}
	}
	if env, ok := cfg.With["env"]; ok {
		if _, isMap := env.(map[string]any); !isMap {
			return nil, steps.FieldErrorf(steps.WithPath("env"), "with.env must be a mapping of names to values")
		}
	}
	if err := checkSessionKeys(cfg.With); err != nil {
		return nil, err
	}
	if err := checkToolKeys(cfg.With); err != nil {
		return nil, err
	}
	from, fork, err := continuation(cfg.With)
	if err != nil {
		return nil, err
	}
	output, err := prepareOutputSchema(cfg.With, cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &subagent{kind: k, id: cfg.ID, agent: agent, from: from, fork: fork, output: output}
	if v, ok := cfg.With["mcp-servers"]; ok && v != nil {
		s.ownMCP, _ = acpagent.MCPServersOf(v, steps.WithPath("mcp-servers")) // checked above
	}
	s.ownEnv, _ = cfg.With["env"].(map[string]any)
	if v, ok := cfg.With["cwd"].(string); ok {
		s.withCwdSet = true
		if !strings.Contains(v, "${{") {
			s.withCwd = v
		}
	}
	if v, ok := cfg.With["sandbox"]; ok {
		sb, err := confine.Parse(v)
		if err != nil {
			var fe *steps.FieldError
			if errors.As(err, &fe) {
				return nil, steps.FieldErrorf(steps.WithPath("sandbox"), "with.%s", fe.Err)
			}
			return nil, err
		}
		s.sandbox, s.sandboxSet = sb, true
	}
	return s, nil
}

// continuation reads with.session and with.fork: the step whose session
// this one continues, and whether it branches it. Both are literals, so
// that `validate` can check the reference (an ancestor through needs, the
// same agent) before anything runs.
func continuation(with map[string]any) (from string, fork bool, err error) {
	if v, ok := with["session"]; ok {
		s, isString := v.(string)
		switch {
		case !isString:
			return "", false, steps.FieldErrorf(steps.WithPath("session"), "with.session: want the id of an earlier step, got %s", steps.Describe(v))
		case s == "":
			return "", false, steps.FieldErrorf(steps.WithPath("session"), "with.session is empty; omit the key for a new session")
		case strings.Contains(s, "${{"):
			return "", false, steps.FieldErrorf(steps.WithPath("session"), "with.session must name a step as written, not an expression (validate checks it)")
		}
		from = s
	}
	if v, ok := with["fork"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return "", false, steps.FieldErrorf(steps.WithPath("fork"), "with.fork: want true or false, got %s", steps.Describe(v))
		}
		if b && from == "" {
			return "", false, steps.FieldErrorf(steps.WithPath("fork"), "with.fork needs with.session: the step whose session to branch")
		}
		fork = b
	}
	return from, fork, nil
}

// checkSessionKeys checks the shapes of with.mode, with.config and
// with.max-output, which replace or layer over the agent's. Values that
// are still templates are checked when rendered, by the runner.
//
// After rendering, the runner finds: mode a string ("" sets no mode);
// config a map[string]any whose values are strings or booleans (read each
// with acpagent.ConfigValue); max-output an int (bytes) or a string (read
// either with acpagent.SizeOf).
func checkSessionKeys(with map[string]any) error {
	if v, ok := with["mode"]; ok {
		switch x := v.(type) {
		case string:
		case int, float64:
			return steps.FieldErrorf(steps.WithPath("mode"), "with.mode: want a mode id (a string such as read-only), got the number %v; quote it if the agent's mode id is %q", x, fmt.Sprint(x))
		default:
			return steps.FieldErrorf(steps.WithPath("mode"), "with.mode: want a mode id (a string such as read-only), got %s", steps.Describe(v))
		}
	}
	if v, ok := with["config"]; ok {
		cfg, isMap := v.(map[string]any)
		if !isMap {
			return steps.FieldErrorf(steps.WithPath("config"), "with.config: want a mapping of option ids to values (e.g. {model: o3}), got %s", steps.Describe(v))
		}
		ids := make([]string, 0, len(cfg))
		for id := range cfg {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if id == "" {
				return steps.FieldErrorf(steps.WithPath("config"), "with.config: an option id is empty")
			}
			if _, err := acpagent.ConfigValue(cfg[id]); err != nil {
				return steps.FieldErrorf(steps.WithPath("config", id), "with.config.%s: %w", id, err)
			}
		}
	}
	if v, ok := with["max-output"]; ok {
		switch x := v.(type) {
		case string:
			if strings.Contains(x, "${{") {
				break
			}
			if _, err := acpagent.ParseSize(x); err != nil {
				return steps.FieldErrorf(steps.WithPath("max-output"), "with.max-output: %w", err)
			}
		case int, float64:
			if _, err := acpagent.SizeOf(x); err != nil {
				return steps.FieldErrorf(steps.WithPath("max-output"), "with.max-output: %w", err)
			}
		default:
			return steps.FieldErrorf(steps.WithPath("max-output"), "with.max-output: want a size such as 8 MiB or a whole number of bytes, got %s", steps.Describe(v))
		}
	}
	return nil
}

var _ steps.AgentKind = (*Kind)(nil)

// AgentKeys are the keys of an agent's mapping (acpagent.AgentKeys).
func (*Kind) AgentKeys() []string { return acpagent.AgentKeys }

// DecodeAgent reads an agent's mapping (acpagent.DecodeAgent).
func (*Kind) DecodeAgent(name string, b steps.AgentBlock) *steps.Agent {
	return acpagent.DecodeAgent(name, b)
}
