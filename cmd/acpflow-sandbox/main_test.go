package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The launcher's start is most of what a sandboxed spawn costs, so it must
// stay a static Go program whatever CGO_ENABLED says: a package that
// brings cgo (net's resolver, os/user, libpsx) made it a dynamically
// linked one that starts several milliseconds slower.
func TestTheLauncherLinksNoCgo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "runtime/cgo" || pkg == "net" || pkg == "os/user" {
			t.Errorf("the launcher links %s, which brings cgo", pkg)
		}
	}
}
