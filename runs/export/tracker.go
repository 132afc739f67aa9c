package export

import (
	"encoding/json"
	"strconv"
)

// Tracker follows the evidence of each process to say what is missing.
type Tracker struct {
	procs map[procKey]*procState
	order []procKey
	execs map[string]bool
}

type procKey struct {
	execution string
	turn      int
}

type procState struct {
	next [2]int64 // next expected offset of stdout, stderr
	gap  [2]bool
	end  *End
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{procs: map[procKey]*procState{}, execs: map[string]bool{}}
}

func streamIndex(kind string) int {
	if kind == KindStderr {
		return 1
	}
	return 0
}

var streamNames = [2]string{KindStdout, KindStderr}

// See takes one item, in order.
func (t *Tracker) See(it Item) {
	k := procKey{it.Execution, it.Turn}
	p := t.procs[k]
	if p == nil {
		p = &procState{}
		t.procs[k] = p
		t.order = append(t.order, k)
		t.execs[it.Execution] = true
	}
	switch it.Kind {
	case KindStdout, KindStderr:
		i := streamIndex(it.Kind)
		if off := offset(it.Attr); off != p.next[i] {
			p.gap[i] = true
		} else {
			p.next[i] = off + int64(len(it.Data))
		}
	case KindEnd:
		var e End
		if json.Unmarshal(it.Data, &e) == nil {
			p.end = &e
		}
	}
}

// Missing lists what is missing, in a fixed order: the run still going,
// agent executions without evidence (in the order given), then each
// process's problems in the order its evidence started.
func (t *Tracker) Missing(finished bool, agentExecutions []string) []Missing {
	out := []Missing{}
	if !finished {
		out = append(out, Missing{Reason: "run_active"})
	}
	for _, e := range agentExecutions {
		if !t.execs[e] {
			out = append(out, Missing{Reason: "no_evidence", Execution: e})
		}
	}
	for _, k := range t.order {
		p := t.procs[k]
		turn := k.turn
		if p.end == nil {
			out = append(out, Missing{Reason: "unfinished", Execution: k.execution, Turn: &turn})
			continue
		}
		recorded := [2]int64{p.end.Stdout, p.end.Stderr}
		truncated := [2]bool{p.end.StdoutTruncated, p.end.StderrTruncated}
		for i := range 2 {
			if p.gap[i] || p.next[i] != recorded[i] {
				out = append(out, Missing{Reason: "gap", Execution: k.execution, Turn: &turn, Stream: streamNames[i]})
			}
			if truncated[i] {
				out = append(out, Missing{Reason: "truncated", Execution: k.execution, Turn: &turn, Stream: streamNames[i]})
			}
		}
	}
	return out
}

func offset(attr string) int64 {
	n, _ := strconv.ParseInt(attr, 10, 64)
	return n
}
