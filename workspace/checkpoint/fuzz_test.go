package checkpoint_test

import (
	"errors"
	"reflect"
	"regexp"
	"testing"

	"github.com/oecp/oecp/workspace/checkpoint"
)

var sha = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FuzzDecode reads any bytes as a kept checkpoint: anything Decode refuses
// is ErrCorrupt; what it accepts is skipped or names a base and a commit
// that are full hexadecimal object names, and encodes back to a checkpoint
// that decodes to the same value.
func FuzzDecode(f *testing.F) {
	const a, b = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []checkpoint.Checkpoint{
		{Execution: "run-a/one/1", Base: a, Commit: b, Bundle: []byte("# v2 git bundle\n\x00\xff")},
		{Execution: "run-a/one/1", Base: a, Commit: a},
		{Execution: "run-a/one/1", Base: a, Commit: b, Ref: checkpoint.HiddenRefPrefix + "oecp/run-test"},
		{Execution: "run-a/one/1", Skipped: "the checkpoint is over the limit of 16 bytes (--checkpoint-max-bytes)"},
	} {
		f.Add(c.Encode())
	}
	for _, s := range []string{"not a checkpoint", "{}\n", "null\n\n", `{"base":"` + a + `","commit":"` + b + "\"}\r\n", `{"skipped":1}` + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := checkpoint.Decode(data)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("refused without ErrCorrupt: %v", err)
			}
			return
		}
		if c.Skipped == "" && (!sha.MatchString(c.Base) || !sha.MatchString(c.Commit)) {
			t.Fatalf("accepted base %q, commit %q", c.Base, c.Commit)
		}
		again, err := checkpoint.Decode(c.Encode())
		if err != nil {
			t.Fatalf("its own encoding is refused: %v", err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed it:\n%+v\n%+v", c, again)
		}
	})
}
