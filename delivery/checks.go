package delivery

import (
	"context"
	"fmt"
	"strings"
)

// Combined results of a commit's checks.
const (
	checksFailed      = "failed"
	checksPending     = "pending"
	checksPassed      = "passed"
	checksNotRequired = "not_required"
)

// maxCIDiagnostic bounds the CI diagnostic of a ci_failed receipt.
const maxCIDiagnostic = 8192

// checks combines the check runs and the commit status of head: any
// failure fails (the diagnostic names the failed checks), else anything
// pending is pending, else anything passed passes, else none is required.
func (f forge) checks(ctx context.Context, head string) (result, diag string, err error) {
	var runs struct {
		TotalCount int `json:"total_count"`
		CheckRuns  []struct {
			Name       string  `json:"name"`
			Conclusion *string `json:"conclusion"`
			Output     struct {
				Title string `json:"title"`
			} `json:"output"`
		} `json:"check_runs"`
	}
	if err := f.call(ctx, &runs, "repos/"+f.repo+"/commits/"+head+"/check-runs", "--method", "GET",
		"-H", "Accept: application/vnd.github+json", "-f", "per_page=100"); err != nil {
		return "", "", err
	}
	if runs.TotalCount != len(runs.CheckRuns) {
		return "", "", fmt.Errorf("%w: %d check runs of %d listed", errForge, len(runs.CheckRuns), runs.TotalCount)
	}
	var status struct {
		State    string `json:"state"`
		Statuses []struct {
			Context     string `json:"context"`
			State       string `json:"state"`
			Description string `json:"description"`
		} `json:"statuses"`
	}
	if err := f.call(ctx, &status, "repos/"+f.repo+"/commits/"+head+"/status", "--method", "GET"); err != nil {
		return "", "", err
	}
	var failed []string
	pending, passed := false, false
	for _, r := range runs.CheckRuns {
		switch c := conclusion(r.Conclusion); c {
		case "success", "neutral", "skipped":
			passed = true
		case "failure", "cancelled", "timed_out", "action_required", "stale":
			failed = append(failed, fmt.Sprintf("check %s: %s %s", r.Name, c, r.Output.Title))
		case "":
			pending = true
		default:
			return "", "", fmt.Errorf("%w: check %s has conclusion %q", errForge, r.Name, c)
		}
	}
	if len(status.Statuses) > 0 {
		switch status.State {
		case "success":
			passed = true
		case "pending":
			pending = true
		case "failure", "error":
			failed = append(failed, "combined status "+status.State)
			for _, s := range status.Statuses {
				if s.State == "failure" || s.State == "error" {
					failed = append(failed, fmt.Sprintf("status %s: %s %s", s.Context, s.State, s.Description))
				}
			}
		default:
			return "", "", fmt.Errorf("%w: combined status %q", errForge, status.State)
		}
	}
	switch {
	case len(failed) > 0:
		return checksFailed, truncate("CI failed: "+strings.Join(failed, "; "), maxCIDiagnostic), nil
	case pending:
		return checksPending, "", nil
	case passed:
		return checksPassed, "", nil
	}
	return checksNotRequired, "", nil
}

func conclusion(c *string) string {
	if c == nil {
		return ""
	}
	return *c
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
