package procgroup

import (
	"encoding/binary"
	"strings"
	"testing"
)

// procArgs2 builds a KERN_PROCARGS2 buffer as macOS's kernel lays it out.
func procArgs2(exe string, argv, env, apple []string) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(len(argv)))
	b = append(b, exe...)
	b = append(b, 0, 0, 0, 0) // the path's NUL and the padding after it
	for _, s := range [][]string{argv, env, {""}, apple} {
		for _, a := range s {
			b = append(append(b, a...), 0)
		}
	}
	return b
}

func TestTheMacOSEnvironmentParserFindsTheMarkerOnlyInTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		name      string
		argv, env []string
		apple     []string
		want      string
	}{
		{"in the environment", []string{"/bin/sh", "-c", "sleep 9"}, []string{"PATH=/bin", MarkerVar + "=12-34-5", "HOME=/h"}, nil, "12-34-5"},
		{"only as an argument", []string{"/usr/bin/env", MarkerVar + "=1-2-3", "sh"}, []string{"PATH=/bin"}, nil, ""},
		{"only among the loader's strings", []string{"sh"}, []string{"PATH=/bin"}, []string{"executable_path=/bin/sh", MarkerVar + "=1-2-3"}, ""},
		{"with an empty environment", []string{"sh"}, nil, []string{MarkerVar + "=1-2-3"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := procArgs2("/bin/sh", c.argv, c.env, c.apple)
			if got := markerIn(procArgsEnviron(b)); got != c.want {
				t.Errorf("marker %q, want %q (environment read: %q)", got, c.want, strings.Split(string(procArgsEnviron(b)), "\x00"))
			}
		})
	}
}

func TestTheMacOSEnvironmentParserRefusesACutBuffer(t *testing.T) {
	full := procArgs2("/bin/sh", []string{"sh", "-c", "x"}, []string{MarkerVar + "=1-2-3"}, nil)
	for n := 0; n < len(full)-len(MarkerVar+"=1-2-3")-2; n++ {
		if got := markerIn(procArgsEnviron(full[:n])); got != "" {
			t.Fatalf("a buffer cut at %d bytes gave the marker %q", n, got)
		}
	}
}
