package acpsubagent

import (
	"os"
	"path/filepath"

	"github.com/acpflow/acpflow/steps/confine"
)

// npxCacheVar is npm's variable for its cache directory, which holds
// npx's installs (_npx) as well as downloaded packages.
const npxCacheVar = "npm_config_cache"

// npxCache is the npm cache a sandboxed agent started through npx (the
// claude and codex presets' launcher) gets, writable, instead of the
// user's ~/.npm: what the agent writes there must never run outside a
// sandbox, and the user's own npx runs ~/.npm/_npx unconfined (SPEC
// §10). It is made and added to r's state dirs, and replaces any
// npm_config_cache of env as TMPDIR does; "" when the command is not npx
// or the user has no cache directory.
//
// Measured with npm 11 (docs/sandbox.md): `npx -y PACKAGE` fetches the
// package's metadata into the cache at every start, so it fails on a
// read-only cache (EROFS, also with prefer-offline); a private cache per
// spawn works offline only when the package is installed in the cwd's
// node_modules, and otherwise downloads the whole adapter at every spawn
// (claude-agent-acp 0.101.0: 588 MB, 42 s). So the cache is acpflow's own,
// under the user's cache directory, shared by sandboxed npx spawns only:
// a package an agent planted there runs only in a later sandbox.
func npxCache(path string, r *confine.Request) string {
	if filepath.Base(path) != "npx" {
		return ""
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir := filepath.Join(base, "acpflow", "npm")
	makeStateDir(dir)
	r.StateDirs = append(r.StateDirs, dir)
	return dir
}
