//go:build !linux

package sandbox

import (
	"fmt"
	"runtime"
)

// DenialWatch would read the kernel's refusals; there is no sandbox here,
// so nothing is refused and nothing read.
type DenialWatch struct{}

// WatchDenials says that only Linux's audit log reports refusals.
func WatchDenials() (*DenialWatch, error) {
	return nil, fmt.Errorf("the kernel's refusals are read from Linux's audit log; this is %s", runtime.GOOS)
}

// Attach does nothing: there is no watch.
func (w *DenialWatch) Attach(pid int) {}

// Denials is empty: there is no watch.
func (w *DenialWatch) Denials() Denials { return Denials{} }

// Close does nothing: there is no watch.
func (w *DenialWatch) Close() {}
