package flow

import "github.com/acpflow/acpflow/engine"

// EnvFor is what a run's Request carries of the submitting machine's
// environment: only the variables that the workflow's if:, for-each: and
// outputs: name (env.NAME or env["NAME"]), which the workflow evaluates
// and so holds in its history. Templates in with: and the env policies
// see the worker's own environment, in the activity, and never travel.
func EnvFor(wf *engine.Workflow, ambient map[string]string) map[string]string {
	var exprs []*engine.Expr
	for _, st := range wf.Steps {
		if st.If != nil {
			exprs = append(exprs, st.If)
		}
		if st.ForEach != nil {
			exprs = append(exprs, st.ForEach)
		}
	}
	for _, o := range wf.Outputs {
		exprs = append(exprs, o.Value.Exprs()...)
	}
	env := map[string]string{}
	for _, e := range exprs {
		for _, r := range e.Refs() {
			if v, ok := ambient[r.Name]; r.Root == "env" && ok {
				env[r.Name] = v
			}
		}
	}
	return env
}
