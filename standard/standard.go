// Package standard is what every acpflow binary contains: the step kinds
// and the policy forms, each registered by its package's init function.
// A binary (cmd/acpflow, temporal/cmd/acpflow-temporal) imports this
// package for its side effects instead of listing them, so adding a kind
// or a form is one line here for all binaries, and no binary can lack one
// that another has (as caddy's modules/standard).
package standard

import (
	_ "github.com/acpflow/acpflow/policies/wasmpolicy" // the `wasm:` policy form
	_ "github.com/acpflow/acpflow/steps/acpsubagent"   // the acp-subagent step kind
	_ "github.com/acpflow/acpflow/steps/shell"         // the shell step kind (run:)
)
