package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoadConfig reads any bytes as config.yaml: a refusal names the file,
// and a configuration it accepts is saved and read back unchanged.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"current-target: prod\ntargets:\n  prod:\n    url: wss://oecp.example.com/v1\n    token-file: /run/secrets/oecp\n  local:\n    url: ws://127.0.0.1:7777\n",
		"targets:\n  a:\n    url: ws://[::1]:1\n",
		"targets:\n  bad name:\n    url: ws://x\n", "targets:\n  a:\n    token: x\n", "current-target: nope\n",
		"---\n---\n", "targets: [1]\n", "targets:\n  a: null\n", "", "# only a comment\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("a refusal that does not name the file: %v", err)
			}
			return
		}
		again := filepath.Join(dir, "saved", "config.yaml")
		if err := cfg.save(again); err != nil {
			t.Fatalf("save: %v", err)
		}
		back, err := loadConfig(again)
		if err != nil {
			t.Fatalf("its own save is refused: %v", err)
		}
		if !reflect.DeepEqual(normal(cfg), normal(back)) {
			t.Fatalf("saved and read back %+v, was %+v", back, cfg)
		}
	})
}

// normal is cfg with an empty target map as none, which YAML does not
// tell apart once omitted.
func normal(cfg *clientConfig) clientConfig {
	c := *cfg
	if len(c.Targets) == 0 {
		c.Targets = nil
	}
	return c
}
