//go:build !linux

package workspace

import "errors"

// errNoSpread: only Linux's file systems take the hint.
var errNoSpread = errors.New("no directory placement hint on this system")

// spreadChildren does nothing where the TOPDIR hint does not exist.
func spreadChildren(string) error { return errNoSpread }

// spreadsChildren reports false where the TOPDIR hint does not exist.
func spreadsChildren(string) (bool, error) { return false, errNoSpread }
