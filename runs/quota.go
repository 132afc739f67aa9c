package runs

import (
	"errors"
	"strings"

	"github.com/oecp/oecp/store"
)

// errTenantBusy refuses a submission past the tenant's unfinished-run
// quota (Config.MaxActivePerTenant).
var errTenantBusy = errors.New("runs: the tenant has its quota of unfinished runs")

// unfinishedKey is the index of each tenant's number of unfinished runs
// (tenant key → the number plus one, so that a tenant counted at zero
// stays in it). Admissions and finishes keep it, so the quota check reads
// one entry instead of every unfinished run. A tenant not in it
// (none of its runs was admitted or finished since the index exists) is
// counted from the unfinished-run index once.
const unfinishedKey = "\x00native-unfinished"

// unfinishedOf is the number of tenant key tk's unfinished runs, read
// inside the transaction that changes it.
func unfinishedOf(tx store.Tx, tk string) (int, error) {
	n, ok, err := tx.IndexEntry(unfinishedKey, tk)
	if err != nil || ok {
		return int(n) - 1, err
	}
	ix, err := tx.IndexEntries(activeKey)
	if err != nil {
		return 0, err
	}
	count := 0
	for _, e := range ix {
		if strings.HasPrefix(e.Entry, tk+"\x00") {
			count++
		}
	}
	return count, nil
}

// setUnfinished records tenant key tk's number of unfinished runs.
func setUnfinished(tx store.Tx, tk string, n int) error {
	return tx.SetIndexEntry(unfinishedKey, tk, uint64(max(n, 0))+1)
}

// checkTenantActive fails with errTenantBusy when tenant key tk already
// has maxActive unfinished runs (0: unbounded). It reads the count inside
// the submitting transaction, so two concurrent submissions cannot both
// take the last place.
func checkTenantActive(n, maxActive int) error {
	if maxActive > 0 && n >= maxActive {
		return errTenantBusy
	}
	return nil
}
