package acpsubagent

import (
	"os"
	"path/filepath"

	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// presetPaths adds the preset's state dirs (writable) and settings (kept
// read-only: sandbox.Spec's Protect) to spec, each resolved by abs, and
// makes the missing directories among them (makeStateDir).
func presetPaths(p acpagent.Preset, abs func(string) string, spec *sandbox.Spec) {
	for _, d := range p.StateDirs {
		d = abs(d)
		makeStateDir(d)
		spec.StateDirs = append(spec.StateDirs, d)
	}
	for _, f := range p.Settings {
		f = abs(f)
		makeStateDir(f)
		spec.Protect = append(spec.Protect, f)
	}
}

// npxCacheVar is npm's variable for its cache directory, which holds
// npx's installs (_npx) as well as downloaded packages.
const npxCacheVar = "npm_config_cache"

// npxCache is the npm cache a sandboxed agent started through npx (the
// claude and codex presets' launcher) gets, writable, instead of the
// user's ~/.npm: what the agent writes there must never run outside a
// sandbox, and the user's own npx runs ~/.npm/_npx unconfined (SPEC
// §10). It is made and added to spec's state dirs, and replaces any
// npm_config_cache of env as TMPDIR does; "" when the command is not npx.
//
// Measured with npm 11 (docs/sandbox.md): `npx -y PACKAGE` fetches the
// package's metadata into the cache at every start, so it fails on a
// read-only cache (EROFS, also with prefer-offline); a private cache per
// spawn works offline only when the package is installed in the cwd's
// node_modules, and otherwise downloads the whole adapter at every spawn
// (claude-agent-acp 0.101.0: 588 MB, 42 s). So the cache is acpflow's own,
// under the user's cache directory, shared by sandboxed npx spawns only:
// a package an agent planted there runs only in a later sandbox.
func npxCache(path, tmp string, spec *sandbox.Spec) string {
	if filepath.Base(path) != "npx" {
		return ""
	}
	dir := filepath.Join(tmp, "npm")
	if base, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(base, "acpflow", "npm")
	}
	makeStateDir(dir)
	spec.StateDirs = append(spec.StateDirs, dir)
	return dir
}
