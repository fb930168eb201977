package policies

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestEnvRuleErrorsNeverShowValues: an env rule that fails on a value must
// not put it in the error, which reaches the terminal and the run store:
// the credential rule drops these variables so that nobody sees them
// (issue 11). Each condition fails on the value of GITHUB_TOKEN.
func TestEnvRuleErrorsNeverShowValues(t *testing.T) {
	const secret = "ghp_s3cr3t-[2024"
	for _, cond := range []string{
		`int(value) > 0`,
		`float(value) > 0`,
		`duration(value) > duration("1s")`,
		`date(value) > now()`,
		`date(value, "2006") > now()`,
		`fromJSON(value) != nil`,
		`"x" matches value`,
		`"x" matches ("(" + value)`,
		`int(name == "GITHUB_TOKEN" ? value : "1") > 0`,
	} {
		t.Run(cond, func(t *testing.T) {
			prog, err := CompileEnvCondition(cond)
			if err != nil {
				t.Fatal(err)
			}
			rules := &EnvRules{ScrubCredentials: true, Rules: []EnvRule{&EnvExprRule{If: prog, Keep: true}}}
			_, err = rules.DecideEnv(context.Background(), &EnvRequest{Ambient: map[string]string{"GITHUB_TOKEN": secret}})
			if err == nil {
				t.Fatal("the rule did not fail")
			}
			for _, leak := range []string{secret, "s3cr3t", "[2024"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error shows %q: %v", leak, err)
				}
			}
		})
	}
}

// TestRuleConditionsCannotExhaustMemory: the conditions of permission and
// env rules are guarded as the engine's expressions are.
func TestRuleConditionsCannotExhaustMemory(t *testing.T) {
	for _, cond := range []string{
		`len(reduce(1..40, #acc + #acc, "x")) > 0`,
		`len(repeat(repeat("x", 1000), 1000000)) > 0`,
		`len(join(map(1..100000, repeat("y", 1000)))) > 0`,
		`len(toJSON(reduce(1..30, [#acc, #acc], tool.command))) > 0`,
	} {
		t.Run(cond, func(t *testing.T) {
			prog, err := CompilePermissionCondition(cond)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = (&PermissionRules{Rules: []PermissionRule{{If: prog, Then: Allow}}}).DecidePermission(context.Background(), &PermissionRequest{})
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "64 MiB") {
				t.Fatalf("err = %v", err)
			}
			// The time is a hang guard (tens of ms idle), the memory the bound.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 || time.Since(start) > 30*time.Second {
				t.Errorf("allocated %d MiB in %v", alloc>>20, time.Since(start))
			}
			env, err := CompileEnvCondition(strings.ReplaceAll(cond, "tool.command", "value"))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := (&EnvExprRule{If: env}).Match("X", "v", &EnvRequest{}); err == nil {
				t.Error("the env rule did not fail")
			}
		})
	}
}
