package capsule_test

import (
	"archive/tar"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// startRecorder listens on the host's loopback for the archives a CLI
// wrapper sends from inside the agent sandbox, where nothing it writes
// reaches the host: the Nth connection (counted from 0) is process N.
// With greet the recorder first sends "N\n" (the process's turn number).
// The connection then carries a tar archive in 512-byte records (tar -b
// 1), so that it ends with its end marker, all of it read before the
// answer, and the answer is never lost to a reset over unread bytes. Each
// regular file of it is written as dir/name(N, its base name), dir/count
// becomes the number of processes recorded, and "ok\n" answers that they
// are written. It returns the port, to be allowed into the sandbox.
func startRecorder(t *testing.T, dir string, greet bool, name func(n int, file string) string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	save := func(c net.Conn, n int) error {
		if greet {
			if _, err := fmt.Fprintf(c, "%d\n", n); err != nil {
				return err
			}
		}
		tr := tar.NewReader(c)
		for {
			hd, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if hd.Typeflag != tar.TypeReg {
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, name(n, filepath.Base(hd.Name))), data, 0o644); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		count = max(count, n+1)
		return os.WriteFile(filepath.Join(dir, "count"), []byte(strconv.Itoa(count)+"\n"), 0o644)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if err := save(c, n); err != nil {
					t.Errorf("recording process %d: %v", n, err)
					return
				}
				_, _ = c.Write([]byte("ok\n"))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		testkit.Wait(t, &wg)
	})
	return ln.Addr().(*net.TCPAddr).Port
}
