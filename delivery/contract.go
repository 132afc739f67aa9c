// Package delivery is the git delivery of a native run, the
// builtin.git-delivery.pr@1 and builtin.git-delivery.merge@1 verifier
// nodes: it commits the run's workspace with a fixed identity, pushes the
// run's own branch to the repository's remote, then opens or finds again
// one pull request through the repository's forge CLI and, in merge mode,
// merges it once its checks pass. The outcome is a verifier outcome whose
// output is the delivery receipt and whose signal `delivery` says how it
// ended. Credentials come from the host's repository file only, never
// from a tenant.
package delivery

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
)

// Worker references of the delivery nodes, and their modes.
const (
	WorkerPR    = "builtin.git-delivery.pr@1"
	WorkerMerge = "builtin.git-delivery.merge@1"
	ModePR      = "pr"
	ModeMerge   = "merge"
)

// Outcome labels of the `delivery` signal.
const (
	Opened   = "opened"
	Merged   = "merged"
	Conflict = "conflict"
	CIFailed = "ci_failed"
)

// ErrContract is a delivery node whose declaration is not the contract.
var ErrContract = errors.New("not a git delivery node")

// labels are the outcome labels of each mode.
var labels = map[string][]string{ModePR: {Opened}, ModeMerge: {CIFailed, Conflict, Merged}}

// Mode returns the mode of a delivery worker reference ("" for another).
func Mode(worker string) string {
	switch worker {
	case WorkerPR:
		return ModePR
	case WorkerMerge:
		return ModeMerge
	}
	return ""
}

// CheckNode checks that n declares the delivery contract of its worker's
// mode: a verifier without instructions whose output is the receipt
// record (version "v1", the mode, the outcome, and the strings
// repository, targetBranch, headRevision and pullRequestId, all
// required), whose only signal `delivery` has the mode's outcome labels,
// and whose diagnostic is {message: string}. Its input is not checked.
func CheckNode(n graph.Node) error {
	v, ok := n.(*graph.Verifier)
	if !ok {
		return fmt.Errorf("%w: %q must be a verifier", ErrContract, n.NodeName())
	}
	mode := Mode(v.Worker)
	switch {
	case mode == "":
		return fmt.Errorf("%w: %q must use %s or %s", ErrContract, v.Name, WorkerPR, WorkerMerge)
	case v.Instructions != nil:
		return fmt.Errorf("%w: %q must not carry instructions", ErrContract, v.Name)
	case len(v.Signals) != 1 || !slices.Equal(v.Signals["delivery"], labels[mode]):
		return fmt.Errorf("%w: %q must declare exactly the signal delivery with labels %s", ErrContract, v.Name, strings.Join(labels[mode], ", "))
	}
	if !sameType(v.Output, receiptType(mode)) {
		return fmt.Errorf("%w: %q must output the %s receipt %s", ErrContract, v.Name, mode, receiptTypeJSON(mode))
	}
	if !sameType(v.Diagnostic, diagnosticType()) {
		return fmt.Errorf(`%w: %q must declare the diagnostic {"message": string}`, ErrContract, v.Name)
	}
	return nil
}

// receiptTypeJSON is the output type of a mode's receipt.
func receiptTypeJSON(mode string) string {
	enum := func(values ...string) string {
		return `{"type":{"kind":"enum","values":["` + strings.Join(values, `","`) + `"]},"required":true}`
	}
	str := `{"type":{"kind":"string"},"required":true}`
	return `{"kind":"record","fields":{"version":` + enum("v1") + `,"mode":` + enum(mode) + `,"outcome":` + enum(labels[mode]...) +
		`,"repository":` + str + `,"targetBranch":` + str + `,"headRevision":` + str + `,"pullRequestId":` + str + `}}`
}

func receiptType(mode string) graph.PayloadType {
	t, err := graph.DecodePayloadType([]byte(receiptTypeJSON(mode)))
	if err != nil {
		panic("delivery: receipt type: " + err.Error())
	}
	return t
}

func diagnosticType() graph.PayloadType {
	t, err := graph.DecodePayloadType([]byte(`{"kind":"record","fields":{"message":{"type":{"kind":"string"},"required":true}}}`))
	if err != nil {
		panic("delivery: diagnostic type: " + err.Error())
	}
	return t
}

// sameType compares two payload types by their canonical encoding.
func sameType(a, b graph.PayloadType) bool {
	x, err1 := a.MarshalJSON()
	y, err2 := b.MarshalJSON()
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
