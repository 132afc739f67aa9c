package engine

import "log/slog"

// Error lines of a failing ledger. While the store cannot serve (a
// database restarting), every pass, every settlement retry and every
// renewal fails the same way; each such line is logged once, then at most
// once per lograte.DefaultEvery with the count of the repeats left out,
// and one line says when a full pass succeeds again.

// logError logs an error line of a failing ledger read or write, bounded.
func (s *Supervisor) logError(msg string, args ...any) {
	s.errs.Log(s.log, slog.LevelError, "", msg, args...)
}

// ledgerAnswers ends the bound on the error lines after a full pass that
// did not fail, saying so when lines had been logged.
func (s *Supervisor) ledgerAnswers() {
	if s.errs.Reset() {
		s.log.Info("engine: the ledger answers again")
	}
}
