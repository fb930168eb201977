// Package bytesize writes byte counts the way people configure them, for
// error messages about limits: "8 MiB", "512 KiB", "100 bytes".
package bytesize

import "fmt"

// Format writes n as whole GiB, MiB or KiB when it is a multiple of one,
// else as bytes.
func Format(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
