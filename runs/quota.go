package runs

import (
	"errors"
	"strings"

	"github.com/oecp/oecp/store"
)

// errTenantBusy refuses a submission past the tenant's unfinished-run
// quota (Config.MaxActivePerTenant).
var errTenantBusy = errors.New("runs: the tenant has its quota of unfinished runs")

// checkTenantActive fails with errTenantBusy when tenant key tk already
// has maxActive unfinished runs (0: unbounded). It reads the
// unfinished-run index inside the submitting transaction, so two
// concurrent submissions cannot both take the last place.
func checkTenantActive(tx store.ReadTx, tk string, maxActive int) error {
	if maxActive <= 0 {
		return nil
	}
	ix, err := loadIndex(tx, activeKey)
	if err != nil {
		return err
	}
	n := 0
	for entry := range ix {
		if strings.HasPrefix(entry, tk+"\x00") {
			n++
		}
	}
	if n >= maxActive {
		return errTenantBusy
	}
	return nil
}
