package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/oecp/oecp/store/postgres"
	"github.com/spf13/pflag"
)

// postgresConfig configures `--store postgres`: the ledger shared by every
// replica that names the same database and schema.
type postgresConfig struct {
	dsn      string
	schema   string
	pool     int
	leaseTTL time.Duration
}

// dsnEnv names the database when --dsn is not given.
const dsnEnv = "OECP_DSN"

func (p *postgresConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.dsn, "dsn", "", "PostgreSQL URL of the postgres store (default $"+dsnEnv+")")
	fs.StringVar(&p.schema, "pg-schema", "", "schema of the postgres store (default: the DSN's search_path, else "+postgres.DefaultSchema+")")
	fs.IntVar(&p.pool, "pg-pool", postgres.DefaultMaxConns, "connections in the postgres store's pool (one more listens for other replicas' commits)")
	fs.DurationVar(&p.leaseTTL, "lease-ttl", postgres.DefaultLeaseTTL, "postgres store: a replica that stops renewing its run leases loses its runs to another replica after this long")
}

func (p *postgresConfig) validate() error {
	if p.dsn == "" {
		p.dsn = os.Getenv(dsnEnv)
	}
	switch {
	case p.dsn == "":
		return errors.New("--store postgres needs --dsn or $" + dsnEnv)
	case p.pool < 1:
		return fmt.Errorf("--pg-pool %d: want at least 1", p.pool)
	case p.leaseTTL < 100*time.Millisecond:
		return fmt.Errorf("--lease-ttl %v: want at least 100ms", p.leaseTTL)
	}
	return nil
}

func (p *postgresConfig) open(log *slog.Logger) (*postgres.Store, error) {
	return postgres.Open(context.Background(), postgres.Options{
		DSN: p.dsn, Schema: p.schema, MaxConns: int32(p.pool), LeaseTTL: p.leaseTTL, Log: log,
	})
}
