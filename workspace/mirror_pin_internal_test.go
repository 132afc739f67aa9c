package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A mirror's commit is found loose and, once packed, in its pack's
// index; pinKnown then points the run's ref at it the way git would (git
// reads the ref back, fsck passes), and refuses an object the mirror
// does not hold, writing nothing.
func TestPinKnownWritesTheRefGitWould(t *testing.T) {
	repo := t.TempDir()
	gitIn(t, repo, "init", "--quiet")
	var commits []string
	for range 40 { // enough for the search in the pack's index to take several halvings
		gitIn(t, repo, "commit", "--quiet", "--allow-empty", "-m", "c")
		commits = append(commits, gitIn(t, repo, "rev-parse", "HEAD"))
	}
	dir := filepath.Join(repo, ".git")
	objects := filepath.Join(dir, "objects")
	missing := strings.Repeat("0", 39) + "1"
	if !hasObject(objects, commits[0]) || hasObject(objects, missing) || hasObject(objects, "not an id") {
		t.Fatal("loose objects: found the wrong ones")
	}
	gitIn(t, repo, "repack", "-a", "-d", "--quiet")
	for _, c := range commits {
		if _, err := os.Lstat(filepath.Join(objects, c[:2], c[2:])); err == nil {
			t.Fatalf("%s is still loose after repack", c)
		}
		if !hasObject(objects, c) {
			t.Fatalf("%s is in the pack but not found", c)
		}
	}
	if hasObject(objects, missing) || hasObject(objects, "ff"+commits[3][2:]) {
		t.Fatal("packed objects: found one the pack does not hold")
	}
	ref := runRefs + "r1"
	if !pinKnown(dir, ref, commits[7]) {
		t.Fatal("pinKnown refused a commit the mirror holds")
	}
	if got := gitIn(t, repo, "rev-parse", "--verify", ref); got != commits[7] {
		t.Fatalf("git reads the pin as %s, want %s", got, commits[7])
	}
	gitIn(t, repo, "fsck", "--strict", "--no-progress")
	// A mirror of other formats, and a pack index whose pack is gone,
	// are left to git.
	config, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), append(slices.Clone(config), "[extensions]\n\trefStorage = reftable\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if pinKnown(dir, runRefs+"r3", commits[7]) {
		t.Fatal("pinKnown wrote a loose ref into a reftable repository")
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(objects, "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	if err := os.Rename(packs[0], packs[0]+".gone"); err != nil {
		t.Fatal(err)
	}
	if hasObject(objects, commits[9]) {
		t.Fatal("an object was found in the index of a pack that is gone")
	}
	if err := os.Rename(packs[0]+".gone", packs[0]); err != nil {
		t.Fatal(err)
	}
	if pinKnown(dir, runRefs+"r2", missing) {
		t.Fatal("pinKnown pinned an object the mirror does not hold")
	}
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(runRefs+"r2"))); !os.IsNotExist(err) {
		t.Fatalf("a refused pin left a ref: %v", err)
	}
}
