package workflows

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/file"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
)

var (
	policyKeys = policies.BlockKeys
	// policyFileKeys are a bare policy file's: an outer policy may also
	// require a sandbox, say where traces go and where asks go.
	policyFileKeys = append(slices.Clone(policyKeys), "sandbox", "telemetry", "approvals")
)

// decodePolicies reads a `policies:` block, at the top of the file or on a
// step (docs/policies.md); a kind it does not set stays nil.
func (d *decoder) decodePolicies(n *node, ctx string) engine.Policies {
	var p engine.Policies
	keys := policyKeys
	if ctx == "policy file" {
		keys = policyFileKeys
	}
	f := d.fields(n, ctx, keys)
	if f == nil {
		return p
	}
	p.Permission, p.Env = d.policyBlock(n, f)
	if x := f["approvals"]; x != nil && !x.bad {
		p.Approvals = d.decodeApprovals(x, d.file)
	}
	if x := f["sandbox"]; x != nil && !x.bad {
		switch s, _ := x.str(); {
		case s != "required":
			d.at(x.pos, "sandbox: in a policy file, the one value is required (every agent runs sandboxed)")
		default:
			p.SandboxRequired = true
		}
	}
	if x := f["telemetry"]; x != nil && !x.bad {
		p.Telemetry = d.telemetry(x)
	}
	return p
}

// policyBlock hands the block's policies and settings (f, the keys
// policies.BlockKeys names) to package policies, which parses them, and
// places its mistakes on the values at fault.
func (d *decoder) policyBlock(n *node, f map[string]*node) (policies.Permission, policies.Env) {
	block := map[string]any{}
	var broken []string
	for _, key := range policies.BlockKeys {
		x := f[key]
		switch {
		case x == nil:
			continue
		case x.bad:
			broken = append(broken, key)
		case key == "permission" || key == "env":
			d.noteModule(x.plain())
		}
		block[key] = x.plain()
	}
	b, err := policies.ParseBlock(block, d.baseDir(), broken...)
	d.blockErrors(n, err)
	return b.Permission, b.Env
}

// blockErrors places each mistake policies.ParseBlock found: its path
// starts with the block's key (`permission.rules[2].then`), whose value
// specErrors follows the rest of the path from.
func (d *decoder) blockErrors(n *node, err error) {
	var list policies.SpecErrors
	if err == nil || !errors.As(err, &list) {
		if err != nil {
			d.at(n.pos, "%v", err)
		}
		return
	}
	for _, e := range list {
		key, rest, _ := strings.Cut(e.Path, ".")
		at := n.get(key)
		if at == nil { // no path into the block: say it at the block
			at, key, rest = n, "policies", e.Path
		}
		d.specErrors(at, key, policies.SpecErrors{{Path: rest, Err: e.Err}})
	}
}

// noteModule adds the files a policy's form names (`wasm:`, as written;
// policies.FilesOf) to the workflow's Modules, once each.
func (d *decoder) noteModule(v any) {
	for _, path := range policies.FilesOf(v) {
		if !slices.Contains(d.wf.Modules, path) {
			d.wf.Modules = append(d.wf.Modules, path)
		}
	}
}

// baseDir is the directory relative paths of a policy form's file (`wasm:`)
// are resolved against: the workflow file's (docs/workflow.md).
func (d *decoder) baseDir() string {
	return filepath.Dir(d.file)
}

// specErrors places each mistake the policy parser found at the node its
// path names (`rules[2].then`), or as deep as the path can be followed.
func (d *decoder) specErrors(n *node, what string, err error) {
	if err == nil {
		return
	}
	var list policies.SpecErrors
	if !errors.As(err, &list) {
		d.at(n.pos, "%s: %v", what, err)
		return
	}
	for _, e := range list {
		at := nodeAt(n, e.Path)
		var fe *file.Error
		if errors.As(e.Err, &fe) {
			// A condition that does not compile: point into it, and say
			// it without expr's own position and snippet.
			if cutAt, cut := d.commentCut(at); cut {
				d.at(cutAt, "%s.%s: %s", what, e.Path, commentCutMessage)
				continue
			}
			src, _ := at.str()
			d.at(d.find(at, src, fe.From), "%s.%s: %s", what, e.Path, exprMessage(e.Err))
			continue
		}
		if msg := e.Err.Error(); e.Path == "" && strings.HasPrefix(msg, what) {
			d.at(at.pos, "%s", msg)
		} else if e.Path == "" {
			d.at(at.pos, "%s: %s", what, msg)
		} else {
			d.at(at.pos, "%s.%s: %v", what, e.Path, e.Err)
		}
	}
}

// nodeAt follows a spec path (`rules[2].if`) from n, stopping at the
// deepest node that exists.
func nodeAt(n *node, path string) *node {
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' }) {
		var next *node
		if i, err := strconv.Atoi(strings.TrimSuffix(part, "]")); err == nil && strings.HasSuffix(part, "]") {
			if n.kind == sequenceNode && i < len(n.items) {
				next = n.items[i]
			}
		} else if n.kind == mappingNode {
			next = n.get(part)
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// LoadPolicyFile reads a bare policy file: YAML with a top-level
// `permission:` and/or `env:`, each shaped as under `policies:` in a
// workflow (docs/cli.md `policy eval`). Errors are Errors, with positions.
func LoadPolicyFile(path string) (engine.Policies, error) {
	src, err := ReadFile(path, "policy file")
	if err != nil {
		return engine.Policies{}, err
	}
	return parsePolicyFile(path, src, nil)
}

// parsePolicyFile is LoadPolicyFile on src, read from the file name;
// check, when not nil, looks at the parsed file first and reports what it
// refuses (policytext.go).
func parsePolicyFile(name string, src []byte, check func(d *decoder, root *node)) (engine.Policies, error) {
	src = trimBOM(src)
	errs := newErrorList(name, src)
	root := parseYAML(src, errs)
	if root == nil {
		return engine.Policies{}, errs.result()
	}
	d := newDecoder(errs)
	if check != nil {
		check(d, root)
		if err := d.result(); err != nil {
			return engine.Policies{}, err
		}
	}
	p := d.decodePolicies(root, "policy file")
	if root.kind == mappingNode && root.get("permission") == nil && root.get("env") == nil && root.get("sandbox") == nil && root.get("telemetry") == nil && root.get("approvals") == nil {
		d.at(root.pos, "a policy file needs a top-level permission:, env:, sandbox:, telemetry: or approvals:")
	}
	if err := d.result(); err != nil {
		return engine.Policies{}, err
	}
	return p, nil
}

// IsWorkflow tells a workflow from a bare policy file (docs/cli.md `policy
// eval`): a workflow has steps or a name. A file that does not parse
// counts as a workflow, so that the workflow loader words its errors.
func IsWorkflow(src []byte) bool {
	src = trimBOM(src)
	root := parseYAML(src, newErrorList("", src))
	if root == nil || root.kind != mappingNode {
		return true
	}
	return root.get("steps") != nil || root.get("name") != nil
}

// IsPolicyFile tells whether validate checks src as a bare policy file: a
// mapping with neither steps: nor name: (IsWorkflow) and with a top-level
// permission:, env: or sandbox:. A file with none of the three is checked as
// a workflow, so that a workflow that lost its steps: hears about steps:,
// not about policies it never meant to be.
func IsPolicyFile(src []byte) bool {
	if IsWorkflow(src) {
		return false
	}
	src = trimBOM(src)
	root := parseYAML(src, newErrorList("", src))
	return root.get("permission") != nil || root.get("env") != nil || root.get("sandbox") != nil
}
