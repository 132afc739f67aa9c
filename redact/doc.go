// Package redact says what a declared secret looks like in text, and
// replaces it there and in the strings of a JSON value (Secrets.JSON). A
// declared secret is a value the server was told is one (an environment
// variable a run's plan declares); it is redacted as itself and, when it
// is long enough, in the encodings a program commonly prints a secret in
// (Spellings). Every redactor of the server (the harness's live output, a
// run's records, the evidence stream) works from the one list Spellings
// returns, so no two of them disagree on what a secret looks like.
package redact
