package main

import (
	"bytes"
	"testing"
)

func TestWriteYAML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`null`, "null\n"},
		{`{}`, "{}\n"},
		{`"x"`, "x\n"},
		{`{"phase":"running","observedGeneration":1,"currentRunId":null,"labels":{},"items":[]}`,
			"phase: running\nobservedGeneration: 1\ncurrentRunId: null\nlabels: {}\nitems: []\n"},
		{`{"status":{"operational":{"labels":{"a b":"c","team":"x"}}},"nums":[1,2.5,-3e2]}`,
			"status:\n  operational:\n    labels:\n      a b: c\n      team: x\nnums:\n  - 1\n  - 2.5\n  - -3e2\n"},
		{`[{"k":"v","w":[true,{"z":"q"}]},[1,[2]]]`,
			"- k: v\n  w:\n    - true\n    - z: q\n- - 1\n  - - 2\n"},
		// Strings YAML would read as something else are JSON-quoted.
		{`["true","no","12","","ws://h:1/x","a #b","-x"," lead","tail ","line\nbreak","run-1"]`,
			"- \"true\"\n- \"no\"\n- \"12\"\n- \"\"\n- \"ws://h:1/x\"\n- \"a #b\"\n- \"-x\"\n- \" lead\"\n- \"tail \"\n- \"line\\nbreak\"\n- run-1\n"},
	} {
		var b bytes.Buffer
		if err := writeYAML(&b, []byte(c.in)); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if b.String() != c.want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.in, b.String(), c.want)
		}
	}
}
