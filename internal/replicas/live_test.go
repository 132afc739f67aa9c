package replicas

import (
	"strings"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// TestV1LiveStreamsOnEveryReplica: the logs stream of every replica
// carries the log lines of a step running on any of them, each once and
// in order, and agent/attach on a replica that does not run the step
// follows its live output to its end.
func TestV1LiveStreamsOnEveryReplica(t *testing.T) {
	cl := startCluster(t, 2)

	conns := []*client.Conn{dial(t, cl.replicas[0]), dial(t, cl.replicas[1])}
	var logs []*client.Subscription[client.LogEvent]
	for _, c := range conns {
		s, err := c.Logs(ctx)
		must(t, err)
		defer s.Close()
		logs = append(logs, s)
	}
	if _, err := conns[0].Apply(ctx, client.ApplyParams{Graph: sleepGraph, Input: input(1500), IdempotencyKey: "live"}); err != nil {
		t.Fatal(err)
	}
	// Both replicas see the step's first line; by then the replica that
	// does not run it has heard the execution start (same sender, in
	// order).
	var exec string
	for i, s := range logs {
		ev, ok := recvOK(t, s.Events())
		if !ok || ev.Record.Message != "sleep: 1500ms" {
			t.Fatalf("replica %d: first log %+v (%v)", i, ev.Record, s.Err())
		}
		exec = ev.Record.Target
	}
	other := 1 - leaseHolder(t, cl)
	att, err := conns[other].AgentAttach(ctx, exec)
	must(t, err)
	var got []string
	for ev, ok := recvOK(t, att.Events()); ok; ev, ok = recvOK(t, att.Events()) {
		line := ev.Event.Type
		if ev.Event.Text != nil {
			line += " " + *ev.Event.Text
		}
		got = append(got, line)
		if ev.Event.Type == "settled" {
			break // the stream then ends without a word
		}
	}
	if strings.Join(got, "|") != "output sleep: done|settled" {
		t.Fatalf("agent/attach on the replica that does not run the step: %q (%v)", got, att.Err())
	}
	for i, s := range logs {
		if ev, ok := recvOK(t, s.Events()); !ok || ev.Record.Message != "sleep: done" || ev.Record.Target != exec {
			t.Fatalf("replica %d: second log %+v (%v)", i, ev.Record, s.Err())
		}
	}
}

// TestV1AttachOnReplicaStartedLater: a replica started while a step of a
// v1 run is already running on another never heard the execution start;
// agent/attach there still follows its live output to its end, and its
// logs stream carries the step's lines. Only an execution that does not
// exist is NOT_FOUND; one that ended is GONE, on a replica started after
// it ended too.
func TestV1AttachOnReplicaStartedLater(t *testing.T) {
	cl := startCluster(t, 1)
	a := dial(t, cl.replicas[0])
	res, err := a.Apply(ctx, client.ApplyParams{Graph: sleepGraph, Input: input(4000), IdempotencyKey: "late"})
	must(t, err)
	w, _, err := a.Watch(ctx, client.WatchParams{RunID: *res.RunID})
	must(t, err)
	until(t, w, func(ev client.WatchEvent) bool { return ev.Event.Type == protocol.EventNodeBegin })
	exec := *res.RunID + "/nap/1"

	late := dial(t, cl.add(t))
	logs, err := late.Logs(ctx)
	must(t, err)
	defer logs.Close()
	att, err := late.AgentAttach(ctx, exec)
	if err != nil {
		t.Fatalf("agent/attach on a replica started after the step began: %v", err)
	}
	if _, err := late.AgentAttach(ctx, *res.RunID+"/nap/9"); client.ErrorCode(err) != protocol.NotFound {
		t.Fatalf("agent/attach of an execution that does not exist: %v, want NOT_FOUND", err)
	}
	var got []string
	for ev := range att.Events() {
		line := ev.Event.Type
		if ev.Event.Text != nil {
			line += " " + *ev.Event.Text
		}
		got = append(got, line)
		if ev.Event.Type == "settled" {
			break
		}
	}
	if strings.Join(got, "|") != "output sleep: done|settled" {
		t.Fatalf("agent/attach on the late replica: %q (%v)", got, att.Err())
	}
	if ev, ok := <-logs.Events(); !ok || ev.Record.Message != "sleep: done" || ev.Record.Target != exec {
		t.Fatalf("logs on the late replica: %+v (%v)", ev.Record, logs.Err())
	}
	until(t, w, finished)
	later := dial(t, cl.add(t))
	if _, err := later.AgentAttach(ctx, exec); client.ErrorCode(err) != protocol.Gone {
		t.Fatalf("agent/attach of an ended execution on a replica started after it: %v, want GONE", err)
	}
}
