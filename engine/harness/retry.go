package harness

import (
	"fmt"
	"regexp"

	"github.com/oecp/oecp/engine/worker"
)

// RetryRecordPrefix begins the log record (level warn) of an agent CLI
// retrying its provider while a turn goes on: Codex's "Reconnecting... 2/5"
// error events and its transport fallbacks, Claude Code's api_retry system
// events. The harness label and the CLI's own words follow. Watchers
// (oecp run watch) show these as they happen: a turn that is only
// retrying looks, from its status, exactly like one that is working.
const RetryRecordPrefix = "retrying: "

// streamRetry is the level of a retry notice.
const streamRetry stream = "warn"

// codexRetryRE finds the words of a Codex message about a retry it makes
// on its own ("Reconnecting... 2/5 (…)", "Re-connecting", "retrying 1/5
// in 200ms", "Falling back from WebSockets to HTTPS transport").
var codexRetryRE = regexp.MustCompile(`(?i)\b(re-?connecting|retrying|falling back)\b`)

// retrying publishes a retry notice of the CLI named label.
func retrying(s worker.Sinks, label, what string) {
	emit(s, streamRetry, RetryRecordPrefix+label+": "+diagnostic(what))
}

// claudeRetry is the notice of a Claude api_retry event: its attempt,
// of how many, the error and its HTTP status when it gave one.
func claudeRetry(attempt, of, status int64, err string) string {
	s := fmt.Sprintf("API retry %d of %d", attempt, of)
	if err != "" {
		s += ": " + err
	}
	if status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", status)
	}
	return s
}
