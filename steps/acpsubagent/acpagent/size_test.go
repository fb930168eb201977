package acpagent

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string // a part of the error; "" when in is a size
	}{
		{"1", 1, ""},
		{"1048576", 1 << 20, ""},
		{" 42 ", 42, ""},
		{"100B", 100, ""},
		{"100 b", 100, ""},
		{"2KB", 2000, ""},
		{"2 KiB", 2048, ""},
		{"8 MiB", 8 << 20, ""},
		{"8mib", 8 << 20, ""},
		{"8 MB", 8_000_000, ""},
		{"1 GiB", 1 << 30, ""},
		{"1GB", 1_000_000_000, ""},
		{"1.5 MiB", 3 << 19, ""},
		{".5 KiB", 512, ""},
		{"1.1 KiB", 1126, ""}, // 1126.4 rounds down
		{"1.0000000001 MiB", 1 << 20, ""},
		{"0", 0, "greater than 0"},
		{"0 MiB", 0, "greater than 0"},
		{"0.0001 B", 0, "greater than 0"},
		{"-5", 0, "greater than 0, got -5"},
		{"-1 MiB", 0, "greater than 0"},
		{"1073741825", 0, "at most 1 GiB"},
		{"1.5 GiB", 0, "at most 1 GiB"},
		{"2 GB", 0, "at most 1 GiB"},
		{"99999999999999999999999 KB", 0, "at most 1 GiB"},
		{"12 parsecs", 0, `unknown unit "parsecs"`},
		{"12 TiB", 0, `unknown unit "TiB"`},
		{"1.5", 0, "not a whole number of bytes"},
		{"", 0, "not a size"},
		{"MiB", 0, "not a size"},
		{"1. MiB", 0, "not a size"},
		{"1e6", 0, "not a size"},
		{"8  MiB", 0, "not a size"},
		{"0x10", 0, "not a size"},
		{"1,000", 0, "not a size"},
	} {
		name := "reads " + tc.in
		if tc.err != "" {
			name = "refuses " + tc.in
		}
		t.Run(name, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want %d", err, tc.want)
			case tc.err == "" && got != tc.want:
				t.Fatalf("got %d, want %d", got, tc.want)
			case tc.err != "" && err == nil:
				t.Fatalf("got %d, want an error with %q", got, tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q does not say %q", err, tc.err)
			}
		})
	}
}

func TestSizeOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want int64
		err  string
	}{
		{"a YAML integer is bytes", 4096, 4096, ""},
		{"an int64 is bytes", int64(4096), 4096, ""},
		{"a string is parsed", "4 KiB", 4096, ""},
		{"zero is refused", 0, 0, "greater than 0"},
		{"a negative number is refused", -1, 0, "greater than 0"},
		{"more than 1 GiB is refused", 1<<30 + 1, 0, "at most 1 GiB"},
		{"a fraction is refused", 1.5, 0, "not a whole number"},
		{"a huge number is too large", 1e20, 0, "too large"},
		{"a boolean is refused", true, 0, "want a size"},
		{"a mapping is refused", map[string]any{}, 0, "want a size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SizeOf(tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %d, %v; want an error with %q", got, err, tc.err)
			}
		})
	}
}
