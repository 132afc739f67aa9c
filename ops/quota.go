package ops

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/server"
)

// QuotaConfig is the per-principal and per-tenant quotas of `oecp serve`.
// Every quota is off at zero.
type QuotaConfig struct {
	// ConnsPerPrincipal bounds a principal's open connections
	// (--max-conns-per-principal); a connection past it is refused with
	// HTTP 429 before the upgrade.
	ConnsPerPrincipal int
	// SubscriptionsPerTenant bounds a tenant's live subscriptions across
	// its connections (--max-subscriptions-per-tenant); a subscription
	// past it is answered SERVER_BUSY before the backend sees it.
	SubscriptionsPerTenant int
	// RatePerTenant is a tenant's request rate in requests per second
	// (--rate-per-tenant), a token bucket holding Burst requests (default:
	// one second's worth, at least 1); a request past it is answered
	// SERVER_BUSY.
	RatePerTenant float64
	Burst         int
}

// Enabled reports whether any quota is set.
func (c QuotaConfig) Enabled() bool {
	return c.ConnsPerPrincipal > 0 || c.SubscriptionsPerTenant > 0 || c.RatePerTenant > 0
}

// Quotas implements server.Limits. A tenant's bucket and subscription
// count live while it has a connection open, so the state is bounded by
// the open connections.
type Quotas struct {
	cfg QuotaConfig
	now func() time.Time

	mu         sync.Mutex
	principals map[string]int
	tenants    map[string]*tenantQuota
}

type tenantQuota struct {
	conns   int // under Quotas.mu
	subs    atomic.Int64
	limiter *rate.Limiter // nil: no rate
}

// NewQuotas returns the quotas of cfg; now is the clock of the rate
// buckets (nil: time.Now).
func NewQuotas(cfg QuotaConfig, now func() time.Time) *Quotas {
	if now == nil {
		now = time.Now
	}
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(math.Ceil(cfg.RatePerTenant)))
	}
	return &Quotas{cfg: cfg, now: now, principals: map[string]int{}, tenants: map[string]*tenantQuota{}}
}

// Open implements server.Limits.
func (q *Quotas) Open(id identity.ConnectionIdentity) (server.ConnLimits, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cfg.ConnsPerPrincipal > 0 && q.principals[id.Principal] >= q.cfg.ConnsPerPrincipal {
		return nil, false
	}
	q.principals[id.Principal]++
	t, ok := q.tenants[id.Tenant]
	if !ok {
		t = &tenantQuota{}
		if q.cfg.RatePerTenant > 0 {
			t.limiter = rate.NewLimiter(rate.Limit(q.cfg.RatePerTenant), q.cfg.Burst)
		}
		q.tenants[id.Tenant] = t
	}
	t.conns++
	return &connQuota{q: q, t: t, principal: id.Principal, tenant: id.Tenant}, true
}

type connQuota struct {
	q                 *Quotas
	t                 *tenantQuota
	principal, tenant string
	closed            atomic.Bool
}

func (c *connQuota) Allow() bool {
	return c.t.limiter == nil || c.t.limiter.AllowN(c.q.now(), 1)
}

func (c *connQuota) OpenSubscription() bool {
	limit := int64(c.q.cfg.SubscriptionsPerTenant)
	if n := c.t.subs.Add(1); limit > 0 && n > limit {
		c.t.subs.Add(-1)
		return false
	}
	return true
}

func (c *connQuota) CloseSubscription() { c.t.subs.Add(-1) }

func (c *connQuota) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.principals[c.principal]--; q.principals[c.principal] <= 0 {
		delete(q.principals, c.principal)
	}
	if c.t.conns--; c.t.conns <= 0 {
		delete(q.tenants, c.tenant)
	}
}
