// Package version holds acpflow's version, sent to agents as clientInfo and
// printed by `acpflow version`.
package version

// Version is overridden at build time with
// -ldflags "-X github.com/acpflow/acpflow/internal/version.Version=v1.2.3".
var Version = "0.1.0-dev"
