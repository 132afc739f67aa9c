package capsule

import (
	"context"
	"time"
)

// Retention runs in the background while the capsule runs: every pass
// deletes, in batches of retentionBatch runs per transaction (so that no
// pass holds the store's writer for long), the history of every v1 and
// native run that ended more than Options.Retain ago.

// retentionBatch bounds the runs one compaction transaction deletes.
const retentionBatch = 32

// RetentionObserver sees how many runs each batch compacted (metrics).
type RetentionObserver interface {
	Compacted(runs int)
}

// compactor is a backend whose ended runs can be compacted.
type compactor interface {
	Compact(ctx context.Context, cutoff time.Time, limit int) (int, error)
}

// retentionInterval is how often a pass runs: a tenth of the retention,
// between a second and a minute.
func retentionInterval(retain time.Duration) time.Duration {
	return min(max(retain/10, time.Second), time.Minute)
}

// retain runs retention passes until ctx ends.
func (c *Capsule) retain(ctx context.Context, retain time.Duration) {
	t := time.NewTicker(retentionInterval(retain))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.compactAll(ctx, time.Now().Add(-retain))
	}
}

// compactAll deletes every run that ended before cutoff, a batch at a
// time, on both backends.
func (c *Capsule) compactAll(ctx context.Context, cutoff time.Time) {
	for _, b := range []compactor{c.backend.Backend, c.backend.runs} {
		for ctx.Err() == nil {
			n, err := b.Compact(ctx, cutoff, retentionBatch)
			if n > 0 && c.retObs != nil {
				c.retObs.Compacted(n)
			}
			if err != nil {
				if ctx.Err() == nil {
					c.log.Error("retention: compaction failed", "err", err)
				}
				break
			}
			if n < retentionBatch {
				break
			}
		}
	}
}
