package bytesize

import "testing"

func TestFormatUsesTheLargestWholeUnit(t *testing.T) {
	for n, want := range map[int64]string{
		8 << 20: "8 MiB", 1 << 30: "1 GiB", 512 << 10: "512 KiB",
		1536 << 10: "1536 KiB", 100: "100 bytes", 0: "0 bytes", 1<<20 + 1: "1048577 bytes",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
