package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadCheckoutTakesOnlyWhatGitWrote: a work tree is kept only when
// every file and link is the inode its git index records: a file written
// anew, a file made a link (to outside the tree) or a link made a file is
// refused, so nothing else's bytes are ever kept.
func TestReadCheckoutTakesOnlyWhatGitWrote(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"untouched", func(*testing.T, string) {}},
		{"file written anew", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a", "f.txt")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("other\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"file made a link", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a", "f.txt")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/etc/passwd", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"link made a file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "l")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("a/f.txt"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			gitIn(t, dir, "init", "--quiet")
			if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("f\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a/f.txt", filepath.Join(dir, "l")); err != nil {
				t.Fatal(err)
			}
			gitIn(t, dir, "add", "-A")
			b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			entries, err := parseGitIndex(b)
			if err != nil || len(entries) != 2 {
				t.Fatalf("%d entries: %v", len(entries), err)
			}
			tc.change(t, dir)
			kept, err := readCheckout(dir, entries)
			if tc.name == "untouched" {
				if err != nil || len(kept.entries) != 2 || string(kept.entries[0].data) != "f\n" || string(kept.entries[1].data) != "a/f.txt" {
					t.Fatalf("the untouched tree is not kept as written: %+v %v", kept, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("kept a tree whose %s", tc.name)
			}
		})
	}
}

// TestKeptTreesLeastRecentlyUsedLeaveFirst: past its limit the store drops
// the trees used longest ago; a tree asked for counts as used.
func TestKeptTreesLeastRecentlyUsedLeaveFirst(t *testing.T) {
	k := newKeptTrees(100)
	k.put("m", "a", &keptTree{bytes: 40})
	k.put("m", "b", &keptTree{bytes: 40})
	if k.get("m", "a") == nil {
		t.Fatal("a is not kept")
	}
	k.put("m", "c", &keptTree{bytes: 40})
	if k.get("m", "b") != nil || k.get("m", "a") == nil || k.get("m", "c") == nil || k.bytes != 80 {
		t.Fatalf("after c: b kept %v, a %v, c %v, %d bytes", k.get("m", "b") != nil, k.get("m", "a") != nil, k.get("m", "c") != nil, k.bytes)
	}
	k.put("m", "huge", &keptTree{bytes: 101})
	if len(k.trees) != 0 || k.bytes != 0 {
		t.Fatalf("a tree past the limit alone: %d trees, %d bytes", len(k.trees), k.bytes)
	}
}
