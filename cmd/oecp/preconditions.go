package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// casState is the state a mutating command's request is built from: the
// generation and run it expects, and what get showed (the phase, and the
// labels update merges into).
type casState struct {
	Generation int64             `json:"generation"`
	RunID      string            `json:"runId,omitempty"` // "" when there is no current run
	Phase      string            `json:"phase,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// readCAS fills the command's preconditions. Flags win; else the state
// remembered with --idempotency-key (see recall); else get, read when a
// precondition is missing, when --if-run must be checked here (methods
// without a run precondition), or when always is set (update's merge).
// --if-run on such a method is compared with the run read: a mismatch is
// the server's RUN_CONFLICT, found before anything is sent.
func (c *cli) readCAS(ctx context.Context, conn *client.Conn, always bool) (casState, error) {
	s, remembered := c.recall()
	needGen := !c.ifGeneration.set && !c.upsert
	needRun := c.ifRun.set != c.runOnWire // read to send it, or to check it
	if !remembered && (always || needGen || needRun) {
		g, err := conn.Get(ctx, client.GetParams{})
		if err != nil {
			return s, err
		}
		s = stateOf(g.Status)
	}
	if c.ifGeneration.set {
		s.Generation = c.ifGeneration.v
	}
	if c.ifRun.set {
		if !c.runOnWire && s.RunID != c.ifRun.v {
			return s, runConflict(s.RunID)
		}
		s.RunID = c.ifRun.v
	}
	if !remembered {
		c.remember(s)
	}
	return s, nil
}

// stateOf is the casState that status shows.
func stateOf(st protocol.ClusterStatus) casState {
	s := casState{Phase: st.Phase}
	if st.ObservedGeneration != nil {
		s.Generation = *st.ObservedGeneration
	}
	if st.CurrentRunID != nil {
		s.RunID = *st.CurrentRunID
	}
	if st.Operational != nil {
		s.Labels = st.Operational.Labels
	}
	return s
}

// runConflict is the refusal the server gives a run precondition that
// does not hold, for --if-run checked by the CLI.
func runConflict(current string) *client.Error {
	var cur any
	if current != "" {
		cur = current
	}
	d, _ := json.Marshal(map[string]any{"currentRunId": cur})
	return &client.Error{Code: protocol.CodeApplication, Message: protocol.MsgRunCAS, DataCode: protocol.RunConflict, Details: d}
}

// keyMemory is how long a remembered --idempotency-key is kept.
const keyMemory = 30 * 24 * time.Hour

// rememberedKey is the file of one remembered key: the command it was
// given to and the preconditions sent with it.
type rememberedKey struct {
	Command string   `json:"command"`
	State   casState `json:"state"`
}

// keyFile is where the key of this command's server is remembered:
// $XDG_CACHE_HOME/oecp/keys (else ~/.cache/oecp/keys), one file named by
// a hash of the server URL, the identity's token and the key, so two
// identities on one machine never share a remembered key (idempotency keys
// are per tenant on the server too).
func (c *cli) keyFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	o, err := c.dialOptions()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(c.server + "\n" + o.Token + "\n" + c.idemKey))
	return filepath.Join(dir, "oecp", "keys", hex.EncodeToString(sum[:16])+".json"), nil
}

// recall returns the preconditions remembered for this command's
// --idempotency-key: the same command with the same key sends the same
// request, so the server answers with the first call's receipt even after
// that call changed the cluster (a fresh get would read the new run and
// the server would refuse the key as reused).
func (c *cli) recall() (casState, bool) {
	if c.idemKey == "" {
		return casState{}, false
	}
	f, err := c.keyFile()
	if err != nil {
		return casState{}, false
	}
	b, err := os.ReadFile(f)
	var k rememberedKey
	if err != nil || json.Unmarshal(b, &k) != nil || k.Command != c.name {
		return casState{}, false
	}
	return k.State, true
}

// remember records s for this command's --idempotency-key before the
// request is sent, and drops keys older than keyMemory. A failure only
// loses the replay guarantee, which it says on stderr.
func (c *cli) remember(s casState) {
	if c.idemKey == "" {
		return
	}
	err := func() error {
		f, err := c.keyFile()
		if err != nil {
			return err
		}
		dir := filepath.Dir(f)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		pruneKeys(dir)
		b, _ := json.Marshal(rememberedKey{Command: c.name, State: s})
		tmp, err := os.CreateTemp(dir, ".key-*")
		if err != nil {
			return err
		}
		_, err = tmp.Write(b)
		if err = errors.Join(err, tmp.Close()); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
		return os.Rename(tmp.Name(), f)
	}()
	if err != nil {
		fmt.Fprintf(c.stderr, "oecp %s: cannot remember --idempotency-key (%v): running this command again with it may be refused as reused\n", c.name, err)
	}
}

// pruneKeys removes remembered keys older than keyMemory.
func pruneKeys(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > keyMemory {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
