package main

// End to end: what a preset's sandbox leaves writable (issue 36, SPEC §10
// "Containment outlives the step"). A preset's state dirs are the
// subdirectories its agent writes in a turn, so the agent's settings
// beside them (hooks, MCP servers: what the user's next unsandboxed
// session runs) stay read-only; an agent started through npx gets an npm
// cache of acpflow's own instead of the user's ~/.npm, whose _npx the
// user's own npx runs unconfined.

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

func TestAPresetsSandboxWritesItsStateNotItsSettings(t *testing.T) {
	w := newSandboxWorld(t)
	claude := filepath.Join(w.home, ".claude")
	// Its own login stays readable (and writable in place): a state file.
	login := writeFile(t, claude, ".credentials.json", "{}\n")
	expect := map[string]string{
		"read:" + login:  "ok",
		"write:" + login: "ok",
		"write:" + filepath.Join(claude, "projects", "session.jsonl"): "ok",
		"write:" + filepath.Join(claude, "settings.json"):             "ERR EACCES",
		"write:" + filepath.Join(claude, "plugins", "hooks.json"):     "ERR EACCES",
		"write:" + filepath.Join(w.home, ".claude.json"):              "ERR EACCES",
	}
	// The claude preset with the test agent as its command: the preset's
	// state dirs, settings and mode (which the test agent must offer).
	s := w.run(t, "preset: claude\nsandbox: true", nil, append(keys(expect), "-modes=default")...)
	s.mustSucceed(t)
	s.want(t, expect)
	write := strList(s.checkEnforced(t, w, "on")["write"])
	if slices.Contains(write, claude) || !slices.Contains(write, filepath.Join(claude, "projects")) {
		t.Errorf("sandbox.write = %v; want ~/.claude/projects in it, not ~/.claude", write)
	}
	// A missing settings directory is made before the spawn, read-only
	// (qwen exits when it cannot make its ~/.qwen/extensions).
	if fi, err := os.Stat(filepath.Join(claude, "plugins")); err != nil || !fi.IsDir() {
		t.Errorf("~/.claude/plugins was not made before the spawn: %v", err)
	}
}

func TestAnAgentStartedThroughNpxGetsAcpflowsNpmCache(t *testing.T) {
	w := newSandboxWorld(t)
	// The test agent under npx's name: acpflow knows a launcher by it.
	w.agent = filepath.Join(t.TempDir(), "npx")
	if err := os.Symlink(testAgent, w.agent); err != nil {
		t.Fatal(err)
	}
	cacheHome := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cacheHome)
	cache := filepath.Join(cacheHome, "acpflow", "npm")
	userNpm := filepath.Join(w.home, ".npm")
	if err := os.MkdirAll(filepath.Join(userNpm, "_npx"), 0o700); err != nil {
		t.Fatal(err)
	}
	expect := map[string]string{
		"write:" + filepath.Join(cache, "planted.js"):           "ok",
		"write:" + filepath.Join(userNpm, "_npx", "planted.js"): "ERR EACCES",
	}
	s := w.run(t, "sandbox: true", nil, keys(expect)...)
	s.mustSucceed(t)
	s.want(t, expect)
	if write := strList(s.checkEnforced(t, w, "on")["write"]); !slices.Contains(write, cache) {
		t.Errorf("sandbox.write = %v; want acpflow's npm cache %s in it", write, cache)
	}
	for _, start := range agentrecord.Named(s.record, "start") {
		if env, _ := start["env"].(map[string]any); env["npm_config_cache"] != cache {
			t.Errorf("the agent's npm_config_cache = %v; want %s", env["npm_config_cache"], cache)
		}
	}
}

// A state dir the agent writes whole (codex's ~/.codex, where it adds
// databases at the top) keeps an existing settings file read-only; a
// missing one can be made in the sandbox, and is moved aside once the
// agent is gone, so the user's next codex never reads it.
func TestASettingsFileAnAgentMakesDoesNotOutliveIt(t *testing.T) {
	w := newSandboxWorld(t)
	codex := filepath.Join(w.home, ".codex")
	hooks := writeFile(t, codex, "hooks.json", "{}\n")
	config := filepath.Join(codex, "config.toml")
	expect := map[string]string{
		"write:" + hooks:  "ERR EROFS",
		"write:" + config: "ok",
		"write:" + filepath.Join(codex, "state.db"): "ok",
	}
	s := w.run(t, "preset: codex\nsandbox: true", nil, append(keys(expect), "-modes=read-only")...)
	s.mustSucceed(t)
	s.want(t, expect)
	if b, _ := os.ReadFile(hooks); string(b) != "{}\n" {
		t.Errorf("~/.codex/hooks.json = %q after the run; want it unchanged", b)
	}
	if _, err := os.Lstat(config); err == nil {
		t.Errorf("~/.codex/config.toml the agent made is still there after the run")
	}
	if _, err := os.Lstat(config + ".acpflow-quarantined"); err != nil {
		t.Errorf("~/.codex/config.toml the agent made was not moved aside: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(codex, "state.db")); err != nil {
		t.Errorf("the agent's own state.db is gone: %v", err)
	}
}

// CODEX_HOME (CLAUDE_CONFIG_DIR, the XDG directories) moves an agent's
// state and settings: the preset's paths follow it, so a CODEX_HOME the
// workflow makes writable keeps its config.toml read-only.
func TestAPresetsPathsFollowTheVariablesThatMoveThem(t *testing.T) {
	w := newSandboxWorld(t)
	codexHome := filepath.Join(w.ws, "ci-codex")
	config := writeFile(t, codexHome, "config.toml", "model = \"x\"\n")
	w.agentEnv = []string{"CODEX_HOME=" + codexHome}
	expect := map[string]string{
		"write:" + config: "ERR EROFS",
		"write:" + filepath.Join(codexHome, "state.db"): "ok",
	}
	s := w.run(t, "preset: codex\nsandbox: true", nil, append(keys(expect), "-modes=read-only")...)
	s.mustSucceed(t)
	s.want(t, expect)
	if write := strList(s.checkEnforced(t, w, "on")["write"]); !slices.Contains(write, codexHome) {
		t.Errorf("sandbox.write = %v; want CODEX_HOME %s, the codex preset's state dir moved", write, codexHome)
	}
}
