package capsule

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/workspace"
)

// ReceiptRecordPrefix begins the log record a git delivery execution
// writes once the forge answered, just before its end record: the
// delivery's Receipt as one JSON object follows. Watchers (oecp run
// watch and status, the web view) read it to show where the change went,
// which neither the run's status nor its result carries.
const ReceiptRecordPrefix = "delivery receipt: "

// Receipt is what a git delivery delivered: the delivery contract's
// receipt (repository, target branch, head revision, pull request id,
// mode and outcome) with the run's own branch, the one pushed, and the
// pull request's web address where the server knows it.
type Receipt struct {
	Repository     string `json:"repository"`
	Branch         string `json:"branch"`
	TargetBranch   string `json:"targetBranch"`
	HeadRevision   string `json:"headRevision"`
	PullRequestID  string `json:"pullRequestId"`
	PullRequestURL string `json:"pullRequestUrl,omitempty"`
	Mode           string `json:"mode"`
	Outcome        string `json:"outcome"`
}

// ParseReceiptRecord reads a log record's message written by
// recordReceipt; ok is false for any other message.
func ParseReceiptRecord(message string) (r Receipt, ok bool) {
	body, found := strings.CutPrefix(message, ReceiptRecordPrefix)
	if !found || json.Unmarshal([]byte(body), &r) != nil || r.Repository == "" {
		return Receipt{}, false
	}
	return r, true
}

// recordReceipt logs a delivery outcome's receipt (a verifier outcome's
// output; an error outcome delivered nothing and logs none). The pull
// request's address is known when the repository's URL is on its forge's
// host: it is then https://HOST/OWNER/NAME/pull/N, the same shape on
// GitHub and GitHub Enterprise.
func recordReceipt(sinks worker.Sinks, out worker.Outcome, repo workspace.Repo, branch string) {
	if sinks.Log == nil || out.Status != "verifier" {
		return
	}
	var r Receipt
	if json.Unmarshal(out.Output, &r) != nil || r.Repository == "" {
		return
	}
	r.Branch = branch
	r.PullRequestURL = PullRequestURL(repo.URL, repo.ForgeCLI().Host, r.Repository, r.PullRequestID)
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	sinks.Log("info", ReceiptRecordPrefix+string(b))
}

// PullRequestURL is the web address of pull request id of repository
// (OWNER/NAME) when the repository's git URL is on the forge's host
// (https://host/…, ssh://git@host/… or git@host:…), else "": a local path
// or another host says nothing about where the forge shows it.
func PullRequestURL(gitURL, forgeHost, repository, id string) string {
	if id == "" || forgeHost == "" || !strings.Contains(repository, "/") {
		return ""
	}
	host := ""
	if u, err := url.Parse(gitURL); err == nil && u.Host != "" && (u.Scheme == "https" || u.Scheme == "http" || u.Scheme == "ssh") {
		host = u.Host
		if u.Scheme == "ssh" {
			host = u.Hostname() // a port of ssh is not the web's
		}
	} else if user, rest, ok := strings.Cut(gitURL, "@"); ok && !strings.Contains(user, "/") {
		if h, _, ok := strings.Cut(rest, ":"); ok && !strings.Contains(h, "/") {
			host = h // scp-like: git@host:owner/name.git
		}
	}
	if host == "" || !strings.EqualFold(host, forgeHost) {
		return ""
	}
	return "https://" + forgeHost + "/" + repository + "/pull/" + url.PathEscape(id)
}
