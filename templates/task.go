package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oecp/oecp/graph"
)

// MaxTaskBytes bounds a task. The task travels in the prompt of every
// agent of the run, and Claude Code takes its whole prompt (instructions,
// input, feedback and contract) as one argument of at most 64 KiB.
const MaxTaskBytes = 32 << 10

// Errors of TaskInput; callers branch on them.
var (
	ErrTask      = errors.New("invalid task")
	ErrTaskGraph = errors.New("the graph takes no task")
)

// TaskInput is the initial input of a run of g whose work is task: g's
// initialInput must be a record with a string field "task", which gets
// the task verbatim, and whose other required fields are strings, each
// seeded empty (the working fields templates read before anything wrote
// them). The value is built by encoding, so any text is safe in it.
func TaskInput(g *graph.GraphSpec, task string) (json.RawMessage, error) {
	switch {
	case strings.TrimSpace(task) == "":
		return nil, fmt.Errorf("%w: it is empty", ErrTask)
	case len(task) > MaxTaskBytes:
		return nil, fmt.Errorf("%w: it has %d bytes; at most %d fit in an agent's prompt", ErrTask, len(task), MaxTaskBytes)
	case !utf8.ValidString(task):
		return nil, fmt.Errorf("%w: it is not UTF-8 text", ErrTask)
	case strings.ContainsRune(task, 0):
		return nil, fmt.Errorf("%w: it contains a NUL byte", ErrTask)
	}
	t := g.InitialInput
	if t.Kind != graph.PayloadRecord || t.Fields[fieldTask].Type.Kind != graph.PayloadString {
		return nil, fmt.Errorf("%w: its initialInput is not a record with a string field %q", ErrTaskGraph, fieldTask)
	}
	input := map[string]string{fieldTask: task}
	for _, name := range slices.Sorted(maps.Keys(t.Fields)) {
		f := t.Fields[name]
		if name == fieldTask || !f.Required {
			continue
		}
		if f.Type.Kind != graph.PayloadString {
			return nil, fmt.Errorf("%w: its initialInput requires %q, which is not a string to seed empty", ErrTaskGraph, name)
		}
		input[name] = ""
	}
	return json.Marshal(input)
}

// ErrNoCloses is a graph whose initial input has no string field
// FieldCloses, so its delivery cannot be told which issue it closes.
var ErrNoCloses = errors.New("the graph's input has no string field " + FieldCloses)

// Closing is input (a TaskInput of g) with FieldCloses set to ref, the
// issue the run's pull request closes.
func Closing(g *graph.GraphSpec, input json.RawMessage, ref string) (json.RawMessage, error) {
	t := g.InitialInput
	if t.Kind != graph.PayloadRecord || t.Fields[FieldCloses].Type.Kind != graph.PayloadString {
		return nil, ErrNoCloses
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("closing: the input is not a record: %w", err)
	}
	v, err := json.Marshal(ref)
	if err != nil {
		return nil, err
	}
	in[FieldCloses] = v
	return json.Marshal(in)
}
