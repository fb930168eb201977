package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// durationValue is a flag that reads durations as the workflow file does
// (docs/workflow.md): a Go duration (`90s`, `10m`, `1h30m`), or a bare integer of
// seconds, so that `--timeout 600` means what `timeout: 600` means.
type durationValue struct{ d *time.Duration }

var _ pflag.Value = durationValue{}

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return fmt.Errorf("want a duration ≥ 0, got %s", s)
		}
		*v.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 90s, 10m or 1h30m, or a number of seconds; got %q", s)
	}
	if d < 0 {
		return fmt.Errorf("want a duration ≥ 0, got %s", s)
	}
	*v.d = d
	return nil
}

func (v durationValue) Type() string { return "duration" }

// DurationFlag adds a duration flag with durationValue's parsing.
func DurationFlag(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}
