package worker

import (
	"context"
	"io"
)

// Tap receives the raw evidence of the external programs started under a
// context: exactly what each program was given and every byte it wrote,
// before any line splitting, sanitising or bound. A host that keeps
// agents' transcripts installs one with WithTap; nothing is recorded
// without it.
type Tap interface {
	// Started is called once a program runs, with its argv and the bytes
	// written to its standard input. It returns raw, which receives each
	// read of the program's "stdout" and "stderr" (the slice is only valid
	// during the call; the two streams may call it concurrently), and done,
	// called once both streams have ended.
	Started(argv []string, stdin []byte) (raw func(stream string, b []byte), done func())
}

type tapKey struct{}

// WithTap returns ctx carrying t for the programs started under it.
func WithTap(ctx context.Context, t Tap) context.Context { return context.WithValue(ctx, tapKey{}, t) }

// tapped returns the raw sink and the end callback of a program started
// under ctx: no-ops when ctx carries no Tap.
func tapped(ctx context.Context, argv []string, stdin []byte) (func(string, []byte), func()) {
	t, ok := ctx.Value(tapKey{}).(Tap)
	if !ok || t == nil {
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
