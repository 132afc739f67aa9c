package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Counter is the value of the first counter series named name that g
// gathers whose labels include labels (nil matches any series), and
// whether g gathers one.
func Counter(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if hasLabels(s.GetLabel(), labels) {
				return s.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// hasLabels reports whether have holds every name and value of want.
func hasLabels(have []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}
