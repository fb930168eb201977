package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(main string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: main}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	checkout := vcs("(devel)", "vcs", "git", "vcs.revision", "0123abcd", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "true")
	for _, c := range []struct {
		name string
		in   build
		bi   *debug.BuildInfo
		want build
	}{
		{"a release: -X wins over the checkout", build{version: "v1.2.3", commit: "feedbeef", date: "2026-12-02T18:00:00Z"}, checkout,
			build{version: "v1.2.3", commit: "feedbeef", date: "2026-12-02T18:00:00Z"}},
		{"a checkout: its commit, commit time and changes", build{version: Dev}, checkout,
			build{version: Dev, commit: "0123abcd", date: "2026-12-01T10:00:00Z", modified: true, committed: true}},
		{"go install @version: the module's version", build{version: Dev}, vcs("v1.4.0"),
			build{version: "v1.4.0"}},
		{"-buildvcs=false: nothing known", build{version: Dev}, vcs("(devel)"),
			build{version: Dev}},
		{"a build date given, the commit from the checkout", build{version: Dev, date: "2026-12-02T18:00:00Z"}, checkout,
			build{version: Dev, commit: "0123abcd", date: "2026-12-02T18:00:00Z", modified: true}},
	} {
		if got := resolve(c.in, c.bi); got != c.want {
			t.Errorf("%s: resolve = %+v, want %+v", c.name, got, c.want)
		}
	}
}
