package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// oecpBin is the binary built once for the CLI tests.
var oecpBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oecp-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	oecpBin = filepath.Join(dir, "oecp")
	build := exec.Command("go", "build", "-o", oecpBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build oecp:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
