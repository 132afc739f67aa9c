package harness

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// The private temporary directory Codex gets inside its home belongs to
// the home's owner (the sandboxed agent's UID), even when the server
// makes it after the home was given away: an agent that cannot use it
// cannot set up Codex's own sandbox, and its commands change nothing.
func TestCodexTmpBelongsToTheHomesOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the home away")
	}
	const agentUID = 64123
	t.Setenv("OPENAI_API_KEY", "sk")
	home := t.TempDir()
	if err := os.Chown(home, agentUID, agentUID); err != nil {
		t.Fatal(err)
	}
	env, err := codexEnv(Turn{Home: home, Env: []string{"OPENAI_API_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(home, "tmp")
	if !slices.Contains(env, "TMPDIR="+tmp) {
		t.Fatalf("env %q lacks TMPDIR=%s", env, tmp)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if own := st.Sys().(*syscall.Stat_t); own.Uid != agentUID || own.Gid != agentUID || st.Mode().Perm() != 0o700 {
		t.Fatalf("%s is %v owned by %d:%d", tmp, st.Mode(), own.Uid, own.Gid)
	}
}
