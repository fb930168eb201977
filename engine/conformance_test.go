package engine_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/enginetest"
	"github.com/acpflow/acpflow/workflows"
)

// The scheduling conformance suite on the CLI's driver (temporal/flow
// runs the same cases on the Temporal interpreter).
func TestConformanceOnTheLocalDriver(t *testing.T) {
	enginetest.Run(t, fake, func(t *testing.T, runID, path string) *engine.RunResult {
		wf, err := workflows.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs, err := workflows.ResolveInputs(wf, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return engine.Run(ctx, wf, engine.Options{
			RunID: runID, Workspace: filepath.Dir(path), Inputs: inputs, RetryBackoff: time.Millisecond, Events: &sink{},
		})
	})
}
