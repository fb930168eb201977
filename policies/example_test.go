package policies_test

import (
	"context"
	"fmt"

	"github.com/acpflow/acpflow/policies"
)

func ExampleAnswer() {
	req := &policies.PermissionRequest{
		Tool: policies.Tool{ID: "call_1", Kind: "execute", Title: "Run rm -rf build"},
		Options: []policies.Option{
			{ID: "a1", Name: "Allow once", Kind: "allow_once"},
			{ID: "r1", Name: "Reject", Kind: "reject_once"},
		},
	}
	rec := policies.Answer(context.Background(), policies.DefaultPermission(), policies.SourceDefault, req)
	fmt.Println(rec.Decision, rec.Outcome, rec.OptionID, rec.Policy, rec.Rule)
	// Output: reject selected r1 default shorthand
}

func ExampleSelectOption() {
	options := []policies.Option{
		{ID: "always", Kind: "allow_always"},
		{ID: "once", Kind: "allow_once"},
	}
	fmt.Println(policies.SelectOption(policies.Allow, "execute", options))
	fmt.Println(policies.SelectOption(policies.Reject, "execute", options))
	// Output:
	// selected once
	// cancelled
}

func ExampleEnvRules_DecideEnv() {
	req := &policies.EnvRequest{
		Ambient: map[string]string{
			"PATH":              "/usr/bin",
			"ANTHROPIC_API_KEY": "sk-ambient",
			"DATABASE_URL":      "postgres://u:pw@db/app",
			"ACPFLOW_DEBUG":     "1",
		},
		Explicit: map[string]string{"CODEX_API_KEY": "sk-explicit"},
	}
	d, err := policies.DefaultEnv().DecideEnv(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Rule)
	for _, kv := range policies.EnvList(d.Env) {
		fmt.Println(kv)
	}
	// Output:
	// inherit=all,scrub-credentials
	// CODEX_API_KEY=sk-explicit
	// PATH=/usr/bin
}

func ExampleIsCredential() {
	for _, name := range []string{"GITHUB_TOKEN", "DATABASE_URL", "GIT_AUTHOR_NAME", "PWD", "MYSQL_PWD"} {
		fmt.Println(name, policies.IsCredential(name))
	}
	// Output:
	// GITHUB_TOKEN true
	// DATABASE_URL true
	// GIT_AUTHOR_NAME false
	// PWD false
	// MYSQL_PWD true
}
