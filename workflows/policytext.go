package workflows

import (
	"fmt"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
)

// MaxPolicyText bounds a policy given as text (ParsePolicyText): a policy
// file of many rules is a few KiB.
const MaxPolicyText = 64 << 10

// ParsePolicyText checks src, a bare policy file's text that someone sent
// (the `acpflow ui` what-if page), as LoadPolicyFile checks a file; name
// stands for the file in errors. Errors quote src, never anything else.
//
// # Notes
//
// The text opens no file: `wasm:`, whose value is a module path, is
// refused, so that a policy sent over the network cannot make the server
// read a path of the sender's choosing. A workflow's text is refused
// too, for the same reason: its steps may name files (a schema, a
// module) that loading it would read.
func ParsePolicyText(name string, src []byte) (engine.Policies, error) {
	if len(src) > MaxPolicyText {
		return engine.Policies{}, fmt.Errorf("%s: %d bytes, more than the limit of %d (64 KiB) for a policy given as text", name, len(src), MaxPolicyText)
	}
	return parsePolicyFile(name, src, refuseFiles)
}

// refuseFiles reports a workflow, and each file a policy form names
// (`wasm:`, policies.Forms), in a policy given as text.
func refuseFiles(d *decoder, root *node) {
	if root.kind == mappingNode && (root.get("steps") != nil || root.get("name") != nil) {
		d.at(root.pos, "this is a workflow: give a policy file's text, a top-level permission: and/or env: (a workflow's policies: block, unindented)")
		return
	}
	for _, key := range []string{"permission", "env"} {
		n := root.get(key)
		if n == nil || n.kind != mappingNode {
			continue
		}
		for _, f := range policies.Forms() {
			if m := n.get(f.Key); m != nil {
				d.at(m.pos, "%s.%s: a policy given as text cannot load a module file; test a %s policy with acpflow policy test POLICY_FILE", key, f.Key, f.Label)
			}
		}
	}
}
