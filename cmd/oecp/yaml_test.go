package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
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

// TestWriteYAMLReadsBack: strings YAML would read as something else
// (booleans, numbers, comments, indicators, edge spaces, line breaks) read
// back as the same strings.
func TestWriteYAMLReadsBack(t *testing.T) {
	in := `{"s":["true","no","12","","ws://h:1/x","a #b","-x"," lead","tail ","line\nbreak","run-1","null","~","1e3"],"n":[1,2.5,true,null]}`
	var b bytes.Buffer
	if err := writeYAML(&b, []byte(in)); err != nil {
		t.Fatal(err)
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(b.Bytes(), &fromYAML); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if err := json.Unmarshal([]byte(in), &fromJSON); err != nil {
		t.Fatal(err)
	}
	// YAML reads 1 as an int where JSON reads float64: compare as JSON.
	y, _ := json.Marshal(fromYAML)
	j, _ := json.Marshal(fromJSON)
	if !reflect.DeepEqual(string(y), string(j)) {
		t.Errorf("read back %s, want %s; YAML:\n%s", y, j, b.String())
	}
}
