package sandbox

import (
	"errors"
	"fmt"
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

// exposedPaths returns what of the harness programs lies inside a hidden
// directory, to be shown read-only. A program is every absolute path of
// an existing file in a harness's argv (the program and, say, the script
// an interpreter runs) and argv[0] found on the server's PATH; for the
// path as given and the file it links to, what is shown is its
// installation (the directory holding its node_modules, else the parent
// of its bin directory, else its own directory), else the outermost
// directory between it and the file that may be shown, else, for a file
// directly in a private directory (/tmp, say), the file alone. A
// directory that is hidden itself or holds a directory of explicit (the
// data directory, say) is never shown, nor is a file directly in one; a
// hidden file inside a shown directory is hidden again on top of it.
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
			if d := shown(c, hidden, explicit); d != "" && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// shown is what exposes path, a file inside a hidden directory: "" when
// nothing may (see exposedPaths).
func shown(path string, hidden, explicit []string) string {
	inst := installation(path)
	var chain []string // from the installation down to the file's directory
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		chain = append([]string{d}, chain...)
		if d == inst || d == "/" || d == "." {
			break
		}
	}
	for _, d := range chain {
		if d != "/" && !slices.Contains(hidden, d) && !holdsAny(d, explicit) {
			return d
		}
	}
	if isPrivate(filepath.Dir(path)) {
		return path
	}
	return ""
}

// isPrivate reports whether dir is one of privateDirs, or where one of
// them really is.
func isPrivate(dir string) bool {
	for _, p := range privateDirs {
		if real, err := filepath.EvalSymlinks(p); p == dir || (err == nil && real == dir) {
			return true
		}
	}
	return false
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

// ErrHiddenProgram is returned by New for a harness program the sandbox
// cannot show its agents.
var ErrHiddenProgram = errors.New("harness program hidden from agents")

// ErrNotFound is returned by Confine for a program an agent would not
// find inside its sandbox.
var ErrNotFound = errors.New("program not found inside the agent sandbox")

// hiddenBy says why an agent inside a sandbox of h with binds mounted
// (workspace, home) does not see path, or the file it links to, where the
// server sees it; "" when it does.
func (h *Host) hiddenBy(path string, binds []string) string {
	binds = slices.DeleteFunc(slices.Clone(binds), func(b string) bool { return b == "" })
	cands := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		cands = append(cands, real)
	}
	for _, c := range cands {
		switch {
		case slices.Contains(h.files, c):
			return c + " is one of the server's files no agent may read"
		case under(c, binds) || under(c, h.expose) || !under(c, h.hide):
			continue
		}
		// The innermost of the paths hidden on purpose says why, else
		// the private directory.
		var in string
		for _, d := range h.explicit {
			if under(c, []string{d}) && len(d) > len(in) {
				in = d
			}
		}
		if in != "" {
			return fmt.Sprintf("%s is inside %s, which the sandbox hides (the server's home, data directory and configuration files are never shown; a program inside them is shown only from a directory of its own that holds none of them)", c, in)
		}
		for _, d := range h.hide {
			if under(c, []string{d}) {
				return fmt.Sprintf("%s is inside %s, which each sandbox gets empty", c, d)
			}
		}
	}
	return ""
}

// checkCommands refuses a harness program (argv[0]) the sandbox would
// not show; one the server cannot find is left to fail when it runs.
func (h *Host) checkCommands(commands []string) error {
	for _, c := range commands {
		path, err := execPath(c)
		if err != nil {
			continue
		}
		if why := h.hiddenBy(path, nil); why != "" {
			if c != path {
				why = c + ": " + why
			}
			return fmt.Errorf("%w: %s; install it elsewhere (under /opt, say)", ErrHiddenProgram, why)
		}
	}
	return nil
}

// othersCannotRun says why a UID that owns nothing there (an agent's on a
// root server) cannot run path, by its mode bits; "" when it can. The
// directories the sandbox makes on the way to a shown one (mode 0755)
// do not count; an ACL may still allow what the bits refuse.
func (h *Host) othersCannotRun(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	st, err := os.Stat(real)
	if err == nil && st.Mode().Perm()&0o001 == 0 {
		return fmt.Sprintf("%s is mode %04o: others may not run it", real, st.Mode().Perm())
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if made := under(d, h.hide) && !under(d, h.expose); !made {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				return fmt.Sprintf("%s is mode %04o: others may not enter it", d, st.Mode().Perm())
			}
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}
