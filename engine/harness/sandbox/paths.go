package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// privateDirs are the host directories every sandbox gets empty and
// private: temporary files and runtime state (sockets, locks) of the host
// stay out of sight.
var privateDirs = []string{"/tmp", "/var/tmp", "/run", "/dev/shm"}

// hiddenPaths splits the paths to hide into directories (the outermost
// ones only, with privateDirs) and files; missing paths are ignored.
// explicit is every directory of paths.
func hiddenPaths(paths []string) (dirs, files, explicit []string) {
	var all []string
	for _, p := range append(slices.Clone(privateDirs), paths...) {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		st, err := os.Stat(abs)
		switch {
		case err != nil || abs == "/":
		case st.IsDir():
			all = append(all, abs)
			if !slices.Contains(privateDirs, abs) {
				explicit = append(explicit, abs)
			}
		case !slices.Contains(files, abs):
			files = append(files, abs)
		}
	}
	slices.Sort(all) // parents before children
	for _, d := range all {
		if !under(d, dirs) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(files)
	return dirs, files, explicit
}

// exposedPaths returns the installations of the harness programs that
// lie inside a hidden directory, to be shown read-only. A program is
// every absolute path of an existing file in a harness's argv (the
// program and, say, the script an interpreter runs) and argv[0] found on
// the server's PATH; for the path as given and the file it links to, the
// installation is the directory holding its node_modules, else the parent
// of its bin directory, else its own directory. An installation holding
// a directory of explicit (the data directory, say) is never shown; a
// hidden file inside one is hidden again on top of it.
func exposedPaths(hidden, explicit, programs []string) []string {
	var out []string
	for _, prog := range programs {
		path, err := execPath(prog)
		if err != nil {
			continue
		}
		cands := []string{path}
		if real, err := filepath.EvalSymlinks(path); err == nil {
			cands = append(cands, real)
		}
		for _, c := range cands {
			if !under(c, hidden) {
				continue
			}
			d := installation(c)
			if slices.Contains(out, d) || slices.Contains(hidden, d) || holdsAny(d, explicit) {
				continue
			}
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func installation(path string) string {
	dir := filepath.Dir(path)
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			return filepath.Dir(d)
		}
	}
	if filepath.Base(dir) == "bin" {
		return filepath.Dir(dir)
	}
	return dir
}

// under reports whether path is one of dirs or inside one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// holdsAny reports whether one of paths is dir or inside it.
func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if under(p, []string{dir}) {
			return true
		}
	}
	return false
}

// ancestorsInHidden lists the directories between the hidden directory
// holding path and path itself, outermost first.
func (h *Host) ancestorsInHidden(path string) []string {
	var out []string
	for d := filepath.Dir(path); d != "/" && d != "."; d = filepath.Dir(d) {
		if !under(d, h.hide) || slices.Contains(h.hide, d) {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// execPath is where the server would find prog: itself when it holds a
// slash, else on the server's PATH; made absolute.
func execPath(prog string) (string, error) {
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return "", err
		}
		prog = p
	}
	if _, err := os.Stat(prog); err != nil {
		return "", err
	}
	return filepath.Abs(prog)
}
