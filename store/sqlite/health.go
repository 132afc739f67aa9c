package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oecp/oecp/store"
)

// unavailableCodes are the SQLite result codes that say the storage cannot
// serve requests (as opposed to a bug or a conflict): a full disk, a
// read-only or damaged database, an I/O error, a file that cannot be
// opened.
var unavailableCodes = map[int]bool{
	sqlite3.SQLITE_FULL:     true,
	sqlite3.SQLITE_READONLY: true,
	sqlite3.SQLITE_IOERR:    true,
	sqlite3.SQLITE_CORRUPT:  true,
	sqlite3.SQLITE_NOTADB:   true,
	sqlite3.SQLITE_CANTOPEN: true,
}

// classify wraps err with store.ErrUnavailable when SQLite failed for a
// reason of the storage underneath.
func classify(err error) error {
	var se *sqlite.Error
	if err != nil && !errors.Is(err, store.ErrUnavailable) && errors.As(err, &se) && unavailableCodes[se.Code()&0xff] {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// maxCheckErrors bounds the problems quick_check lists.
const maxCheckErrors = 8

// quickCheck runs SQLite's quick_check on the writer connection: it reads
// every page and checks the b-trees' structure (but not that indexes match
// their tables), so a damaged database is found before anything trusts it.
func (s *Store) quickCheck(ctx context.Context) error {
	damaged := func(what string) error {
		return fmt.Errorf("%w: the database is damaged or unreadable (quick_check: %s)", store.ErrUnavailable, what)
	}
	rows, err := s.wconn.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", maxCheckErrors))
	if err != nil {
		return damaged(err.Error())
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return damaged(err.Error())
		}
		if line != "ok" {
			problems = append(problems, strings.ReplaceAll(line, "\n", "; "))
		}
	}
	if err := rows.Err(); err != nil {
		return damaged(err.Error())
	}
	if len(problems) > 0 {
		return damaged(strings.Join(problems, "; "))
	}
	return nil
}

// probe commits a write that changes nothing in the end (it raises the
// sequence row and lowers it back in one transaction, so the page is
// written to the log): it fails when the database cannot be written
// (read-only, full disk, I/O error). It wakes no watcher. After Open it
// runs on the writer goroutine.
func (s *Store) probe() error {
	if _, err := s.wconn.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		return classify(fmt.Errorf("write probe: %w", err))
	}
	_, err := s.wconn.ExecContext(bg, "UPDATE sequence SET last = last + 1 WHERE id = 1")
	if err == nil {
		_, err = s.wconn.ExecContext(bg, "UPDATE sequence SET last = last - 1 WHERE id = 1")
	}
	if err == nil {
		_, err = s.wconn.ExecContext(bg, "COMMIT")
	}
	if err != nil {
		_, _ = s.wconn.ExecContext(bg, "ROLLBACK")
		return classify(fmt.Errorf("write probe: %w", err))
	}
	return nil
}

// Ping implements store.Pinger: a read on the reader pool, then a write
// probe on the writer connection.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	var last int64
	var err error
	if werr := s.readers.run(ctx, func() { err = s.rstmts[stLastSeq].QueryRowContext(bg).Scan(&last) }); werr != nil {
		return werr
	}
	if err != nil {
		return classify(fmt.Errorf("store/sqlite: read probe: %w", err))
	}
	_ = s.writer.run(context.Background(), func() { err = s.probe() })
	if err != nil {
		return fmt.Errorf("store/sqlite: %w", err)
	}
	return nil
}
