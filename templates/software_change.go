package templates

import "github.com/oecp/oecp/graph"

// State fields of the templates. The run's input holds the task and every
// other field seeded empty (TaskInput), so every read is defined.
const (
	fieldTask        = "task"               // what the user asked for (Markdown)
	fieldSummary     = "summary"            // the latest writer's account of the change
	fieldAcceptance  = "acceptanceFeedback" // the acceptance verifier's last message
	fieldCode        = "codeFeedback"       // the code verifier's last message
	fieldDelivery    = "deliveryFeedback"   // why the last delivery did not merge
	fieldPullRequest = "pullRequest"        // the delivered pull request's number
	// FieldCloses is the issue a delivering run's pull request closes:
	// "#N" in the delivered repository, "OWNER/NAME#N" in another, or
	// empty for none. --issue sets it; TaskInput seeds it empty.
	FieldCloses = "closes"
)

// deliveryTitle is the field of the delivery's input that titles the pull
// request (its first line with text).
const deliveryTitle = "title"

// software-change's agent nodes, and its delivery node.
const (
	nodeImplement      = "implement"
	nodeAcceptance     = "acceptance"
	nodeCode           = "code"
	nodeRepair         = "repair"
	nodeDeliveryRepair = "delivery_repair"
	nodeDeliver        = "deliver"
)

// The verifiers' signal and its labels, and the delivery's.
const (
	signalVerdict   = "verdict"
	verdictAccepted = "accepted"
	verdictRejected = "rejected"
	signalDelivery  = "delivery"
)

// maxRounds bounds software-change's review rounds.
const maxRounds = 10

// reasonExhausted ends a software-change run whose change was still not
// accepted (or not merged) after maxRounds rounds.
const reasonExhausted = "change_attempts_exhausted"

// softwareChange is the software-change graph with delivery d:
//
//	seq main
//	  step implement                                  task → summary
//	  choice implemented
//	    implement error (each code)                   → fail implement_<cause>
//	    otherwise → seq change
//	      loop rounds (≤ 10, until repair [or delivery_repair] ended in error)
//	        seq round
//	          par review (all)
//	            verifier acceptance                    → acceptanceFeedback
//	            verifier code                          → codeFeedback
//	          choice judged
//	            acceptance error, code error (each code) → fail <node>_<cause>
//	            both accepted                          → succeed done            (no delivery)
//	                                                   → seq ship: deliver (pr; task as title, closes), then
//	                                                     opened → succeed done; error → fail deliver_<cause>
//	                                                   → seq ship: deliver (merge; the same input), then
//	                                                     merged → succeed done; error → fail deliver_<cause>;
//	                                                     conflict, ci_failed → step delivery_repair
//	            otherwise                              → step repair
//	      choice stopped
//	        repair [delivery_repair] error (each code) → fail <node>_<cause>
//	        otherwise (10 rounds)                      → fail change_attempts_exhausted
//
// A failed repair ends the loop through its until (the round has nothing
// after the repair to route it), so it never reaches another review. The
// verifiers' and delivery's errors end the run where they are judged.
func softwareChange(d Delivery) *graph.GraphSpec {
	fields := []string{fieldTask, fieldSummary, fieldAcceptance, fieldCode, fieldDelivery}
	if d != DeliveryNone {
		fields = append(fields, fieldPullRequest, FieldCloses)
	}
	state := record(fields...)

	writers := []string{nodeRepair}
	if d == DeliveryShip {
		writers = append(writers, nodeDeliveryRepair)
	}
	var untilFailed []graph.Guard
	var stopped []graph.ChoiceBranch
	for _, w := range writers {
		untilFailed = append(untilFailed, failed(w))
		stopped = append(stopped, errorRoutes(w)...)
	}
	until := anyOf(untilFailed...)

	judged := append(errorRoutes(nodeAcceptance), errorRoutes(nodeCode)...)
	judged = append(judged, graph.ChoiceBranch{
		When: all(in(signal(nodeAcceptance, signalVerdict), verdictAccepted), in(signal(nodeCode, signalVerdict), verdictAccepted)),
		Node: accepted(d, state),
	})

	review := &graph.Par{
		Name: "review", State: state, Join: graph.Join{Kind: graph.JoinAll},
		Branches: []graph.Node{
			agentVerifier(nodeAcceptance, acceptanceInstructions, fieldAcceptance, fieldTask, fieldSummary),
			agentVerifier(nodeCode, codeInstructions, fieldCode, fieldTask, fieldSummary),
		},
		PromotedStatePaths: paths(fieldAcceptance, fieldCode),
	}
	roundPromoted := paths(fieldSummary, fieldAcceptance, fieldCode)
	judgedPromoted := paths(fieldSummary)
	if d == DeliveryShip {
		roundPromoted = append(roundPromoted, graph.FieldPath{fieldDelivery})
		judgedPromoted = append(judgedPromoted, graph.FieldPath{fieldDelivery})
	}
	round := &graph.Seq{
		Name: "round", State: state, PromotedStatePaths: roundPromoted,
		Children: []graph.Node{
			review,
			&graph.Choice{
				Name: "judged", State: state, PromotedStatePaths: judgedPromoted,
				Branches:  judged,
				Otherwise: agentStep(nodeRepair, repairInstructions, fieldTask, fieldSummary, fieldAcceptance, fieldCode),
			},
		},
	}
	change := &graph.Seq{
		Name: "change", State: state, PromotedStatePaths: paths(),
		Children: []graph.Node{
			&graph.Loop{Name: "rounds", State: state, Body: round, Until: &until, MaxIterations: maxRounds, PromotedStatePaths: paths()},
			&graph.Choice{
				Name: "stopped", State: state, PromotedStatePaths: paths(),
				Branches:  stopped,
				Otherwise: &graph.Fail{Name: "exhausted", Reason: reasonExhausted},
			},
		},
	}
	return agentFirst(state, nodeImplement, implementInstructions, "implemented", change)
}

// accepted is what follows two accepted verdicts: success without a
// delivery, else the delivery and its outcome.
func accepted(d Delivery, state graph.PayloadType) graph.Node {
	if d == DeliveryNone {
		return done(fieldSummary)
	}
	worker, labels, success, timeout := "builtin.git-delivery.pr@1", []string{"opened"}, "opened", uint64(prTimeoutMs)
	if d == DeliveryShip {
		worker, labels, success, timeout = "builtin.git-delivery.merge@1", []string{"ci_failed", "conflict", "merged"}, "merged", shipTimeoutMs
	}
	mode := "pr"
	if d == DeliveryShip {
		mode = "merge"
	}
	// The delivery's input titles the pull request with the task and names
	// the issue it closes.
	deliver := &graph.Verifier{
		Name: nodeDeliver, Worker: worker,
		Input: record(deliveryTitle, FieldCloses), Output: receipt(mode, labels),
		InputBindings: []graph.InputBinding{
			{Target: graph.FieldPath{deliveryTitle}, Value: graph.DataSelector{Source: graph.SourceState, Path: graph.FieldPath{fieldTask}}},
			{Target: graph.FieldPath{FieldCloses}, Value: graph.DataSelector{Source: graph.SourceState, Path: graph.FieldPath{FieldCloses}}},
		},
		WriteBindings: []graph.WriteBinding{write(nodeDeliver, graph.ChannelOut, "pullRequestId", fieldPullRequest)},
		TimeoutMs:     timeout, Attempts: 1,
		Signals:    map[string][]string{signalDelivery: labels},
		Diagnostic: record("message"),
	}
	outcome := &graph.Choice{
		Name: "delivered", State: state, PromotedStatePaths: paths(),
		Branches: append([]graph.ChoiceBranch{{When: in(signal(nodeDeliver, signalDelivery), success), Node: done(fieldSummary, fieldPullRequest)}},
			errorRoutes(nodeDeliver)...),
	}
	ship := &graph.Seq{Name: "ship", State: state, PromotedStatePaths: paths(), Children: []graph.Node{deliver, outcome}}
	if d == DeliveryShip {
		deliver.WriteBindings = append(deliver.WriteBindings, write(nodeDeliver, graph.ChannelDiagnostic, "message", fieldDelivery))
		outcome.Otherwise = agentStep(nodeDeliveryRepair, deliveryRepairInstructions, fieldTask, fieldSummary, fieldDelivery)
		outcome.PromotedStatePaths = paths(fieldSummary)
		ship.PromotedStatePaths = paths(fieldSummary, fieldDelivery)
	}
	return ship
}

// receipt is the output type of git delivery in mode with outcome labels:
// the delivery contract's receipt.
func receipt(mode string, outcomes []string) graph.PayloadType {
	t := record("repository", "targetBranch", "headRevision", "pullRequestId")
	t.Fields["version"] = graph.RecordField{Type: enum("v1"), Required: true}
	t.Fields["mode"] = graph.RecordField{Type: enum(mode), Required: true}
	t.Fields["outcome"] = graph.RecordField{Type: enum(outcomes...), Required: true}
	return t
}
