//go:build !linux

package workspace

import "errors"

// errNoSpread: only Linux's file systems take the hint.
var errNoSpread = errors.New("no directory placement hint on this system")

// setSpread does nothing where the TOPDIR hint does not exist.
func setSpread(string, bool) error { return errNoSpread }

// spreads reports false where the TOPDIR hint does not exist.
func spreads(string) (bool, error) { return false, errNoSpread }
