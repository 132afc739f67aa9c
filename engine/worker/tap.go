package worker

import "io"

// Tap receives the raw evidence of external programs: exactly what each
// program was given and every byte it wrote, before any line splitting,
// sanitising or bound. A host that keeps agents' transcripts gives one to
// an execution (Execution.Tap), which passes it to the processes it
// starts (Process.Tap); nothing is recorded without it.
type Tap interface {
	// Started is called once a program runs, with its argv and the bytes
	// written to its standard input. It returns raw, which receives each
	// read of the program's "stdout" and "stderr" (the slice is only valid
	// during the call; the two streams may call it concurrently), and done,
	// called once both streams have ended.
	Started(argv []string, stdin []byte) (raw func(stream string, b []byte), done func())
}

// tapped returns the raw sink and the end callback of a program started
// with t: no-ops when t is nil.
func tapped(t Tap, argv []string, stdin []byte) (func(string, []byte), func()) {
	if t == nil {
		return nil, func() {}
	}
	return t.Started(argv, stdin)
}

// tapReader passes every read of r to raw as stream.
type tapReader struct {
	r      io.Reader
	raw    func(string, []byte)
	stream string
}

func (t tapReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.raw(t.stream, p[:n])
	}
	return n, err
}

// tap wraps r so raw sees its bytes; r itself when raw is nil.
func tap(r io.Reader, raw func(string, []byte), stream string) io.Reader {
	if raw == nil {
		return r
	}
	return tapReader{r: r, raw: raw, stream: stream}
}
