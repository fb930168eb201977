package acpsubagent

import (
	"fmt"
	"math"
	"strings"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/outputschema"
)

// Bounds of an agent's structured output
// (docs/acp-subagent.md#structured-output).
const (
	// defaultSchemaRetries is how many follow-up prompts a step without
	// schema-retries: sends; maxSchemaRetries is the most it may ask for.
	defaultSchemaRetries = 1
	maxSchemaRetries     = 10
	// maxQuotedSchema is the largest schema a follow-up prompt repeats.
	maxQuotedSchema = 4 << 10
)

// outputSchema is a step's with.output-schema, compiled when the workflow
// is loaded: what the step's final message must be, as JSON, and how many
// times the agent is asked again when it is not.
type outputSchema struct {
	*outputschema.Schema
	retries int // follow-up prompts after a mismatch (schema-retries:)
}

// prepareOutputSchema reads with.output-schema and with.schema-retries. It
// returns nil for a step without output-schema. Its errors are
// *steps.FieldError.
func prepareOutputSchema(with map[string]any, dir string) (*outputSchema, error) {
	schema, err := outputschema.Prepare(with, dir, "the final message")
	if err != nil {
		return nil, err
	}
	if schema == nil {
		if _, set := with["schema-retries"]; set {
			return nil, steps.FieldErrorf(steps.WithPath("schema-retries"), "with.schema-retries needs with.output-schema: the schema the answer is checked against")
		}
		return nil, nil
	}
	retries, err := schemaRetries(with)
	if err != nil {
		return nil, err
	}
	return &outputSchema{Schema: schema, retries: retries}, nil
}

// schemaRetries reads with.schema-retries: a whole number from 0 to
// maxSchemaRetries, default defaultSchemaRetries.
func schemaRetries(with map[string]any) (int, error) {
	v, ok := with["schema-retries"]
	if !ok {
		return defaultSchemaRetries, nil
	}
	n := -1
	switch x := v.(type) {
	case int:
		n = x
	case uint64:
		n = int(min(x, math.MaxInt32))
	case float64:
		if x == math.Trunc(x) && x >= 0 && x <= math.MaxInt32 {
			n = int(x)
		}
	}
	if n < 0 || n > maxSchemaRetries {
		return 0, steps.FieldErrorf(steps.WithPath("schema-retries"), "with.schema-retries: want a whole number from 0 to %d (follow-up prompts after an answer that does not match output-schema), got %s", maxSchemaRetries, steps.Describe(v))
	}
	return n, nil
}

// followUp is the prompt sent when the final message did not match: what
// was wrong, the schema (when it is short), and what to answer.
func (o *outputSchema) followUp(problems []string) string {
	var b strings.Builder
	b.WriteString("Your answer did not match the JSON Schema this answer must match:\n")
	for _, p := range problems {
		b.WriteString("- ")
		b.WriteString(p)
		b.WriteString("\n")
	}
	if len(o.Text()) <= maxQuotedSchema {
		b.WriteString("\nThe schema:\n")
		b.WriteString(o.Text())
		b.WriteString("\n")
	}
	b.WriteString("\nReply with only the corrected JSON value, nothing before or after it.")
	return b.String()
}

// mismatch is a step's error when its last answer still did not match.
func (o *outputSchema) mismatch(problems []string) error {
	after := ""
	switch o.retries {
	case 0:
	case 1:
		after = " (after 1 follow-up prompt)"
	default:
		after = fmt.Sprintf(" (after %d follow-up prompts)", o.retries)
	}
	return fmt.Errorf("the final message does not match with.output-schema%s: %s", after, strings.Join(problems, "; "))
}
