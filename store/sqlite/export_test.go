package sqlite

import "context"

// OpenAtVersion opens a store whose schema is migrated to version v only,
// to build old-version databases for the migration tests. Only Close may be
// called on the result when v < SchemaVersion.
func OpenAtVersion(ctx context.Context, opt Options, v int) (*Store, error) {
	return open(ctx, opt, v)
}
