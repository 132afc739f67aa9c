package runs_test

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/oecp/oecp/capsule"
)

func BenchmarkZZHeap(b *testing.B) {
	for b.Loop() {
		s := benchSQLite(b)
		q := newQueueRig(b, s, capsule.DefaultMaxActive, deepDeep)
		q.run(b, func() {
			runtime.GC()
			f, _ := os.Create("/tmp/heap-deep.prof")
			_ = pprof.WriteHeapProfile(f)
			f.Close()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.Logf("heapalloc %d MB", ms.HeapAlloc>>20)
		})
		q.stop()
		_ = s.Close()
	}
}
