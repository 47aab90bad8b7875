package ingest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// pieces is an input held as pieces (ingest.Chunked), as a request body
// read in chunks is; a piece handed out is overwritten once the next is
// asked for, so that a decoder that kept a reference into it fails.
type pieces struct {
	parts [][]byte
	last  []byte
}

func (p *pieces) NextChunk() []byte {
	for i := range p.last {
		p.last[i] = '#'
	}
	p.last = nil
	if len(p.parts) == 0 {
		return nil
	}
	b := p.parts[0]
	p.parts = p.parts[1:]
	if b == nil {
		b = []byte{}
	}
	p.last = b
	return b
}

func (p *pieces) Read([]byte) (int, error) { panic("a Chunked input read through Read") }

// cut splits in at the given offsets (ascending, within in), each piece a
// copy of its own.
func cut(in string, at []int) *pieces {
	p := &pieces{}
	prev := 0
	for _, a := range at {
		p.parts = append(p.parts, []byte(in[prev:a]))
		prev = a
	}
	p.parts = append(p.parts, []byte(in[prev:]))
	return p
}

// decodeOutcome is everything Decode and DecodeColumns say about an input.
func decodeOutcome(t *testing.T, r func() io.Reader, opts DecodeOptions) string {
	t.Helper()
	var out strings.Builder
	d, err := Decode(r(), opts, func(rows []Row, lines []int) error {
		fmt.Fprintf(&out, "part %v %v\n", rows, lines)
		return nil
	})
	fmt.Fprintf(&out, "decoded %+v error %v\n", d, err)
	d, err = DecodeColumns(r(), opts, func(cb *colbatch.Batch) error {
		fmt.Fprintf(&out, "columns %v %v\n", cb.Rows(), cb.Lines)
		return nil
	})
	fmt.Fprintf(&out, "decoded %+v error %v\n", d, err)
	return out.String()
}

// checkChunked: decoding in from pieces cut at the given offsets gives the
// rows, lines, bad lines and errors of decoding it through a reader.
func checkChunked(t *testing.T, in string, at []int, opts DecodeOptions) {
	t.Helper()
	want := decodeOutcome(t, func() io.Reader { return strings.NewReader(in) }, opts)
	got := decodeOutcome(t, func() io.Reader { return cut(in, at) }, opts)
	if got != want {
		t.Fatalf("%.80q cut at %v, %+v:\npieces:\n%.2000s\nreader:\n%.2000s", in, at, opts, got, want)
	}
}

// TestDecodeChunksMatchesReader: an NDJSON input in pieces (a request
// body's chunks, decoded in place) decodes as the same bytes read through
// an io.Reader do, wherever the pieces are cut: lines within a piece, lines
// across two or many, empty pieces, CRLF, blank and white lines, bad lines,
// a last line without a newline, and lines around the length limit.
func TestDecodeChunksMatchesReader(t *testing.T) {
	rows := strings.Join([]string{
		`{"a":1,"b":"x","c":2.5}`,
		``,
		"  \t",
		`{"a":2,"b":"y"}` + "\r",
		`not json`,
		` {"a":3,"n":{"x":[1,2]}} `,
		"\r",
		`{"a":"\xff"}`,
		"\u00a0" + `{"a":4}` + "\u2028",
		`{"b":"caf\u00e9","a":5}`,
	}, "\n")
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := func(n int) [][]int {
		all := [][]int{nil}
		for _, step := range []int{1, 2, 3, 7, 16, 100} {
			var at []int
			for a := step; a < n; a += step {
				at = append(at, a)
			}
			all = append(all, at)
		}
		for range 20 {
			var at []int
			for a := 0; a <= n; a += rng.IntN(40) {
				at = append(at, a) // repeated offsets: empty pieces
			}
			all = append(all, at)
		}
		return all
	}
	for _, in := range []string{rows, rows + "\n", "\n" + rows + "\r\n", "", "\n", "{}", `{"a":1}` + "\n\n"} {
		for _, at := range cuts(len(in)) {
			for _, policy := range []Policy{Skip, Reject} {
				checkChunked(t, in, at, DecodeOptions{Policy: policy})
				checkChunked(t, in, at, DecodeOptions{Policy: policy, BatchRows: 2})
			}
		}
	}
	// Lines around the limit: a scanner fails on a line of at least
	// max(MaxLine, its first buffer) bytes, '\r' counted, '\n' not.
	for _, maxLine := range []int{1000, lineBufSize, 100_000} {
		limit := max(maxLine, lineBufSize)
		for _, n := range []int{limit - 2, limit - 1, limit, limit + 1} {
			long := `{"s":"` + strings.Repeat("x", n-8) + `"}`
			for _, in := range []string{
				long, long + "\n", long + "\r\n", long + "\r", `{"a":1}` + "\n" + long + "\n" + `{"a":2}`,
				`{"a":1}` + "\n" + long[:n-1] + "\r\n",
			} {
				for _, at := range [][]int{nil, {len(in) / 2}, {1, 2, len(in) - 3}, {lineBufSize - 1, lineBufSize + 1}} {
					if at != nil && at[len(at)-1] > len(in) {
						continue
					}
					checkChunked(t, in, at, DecodeOptions{Policy: Skip, MaxLine: maxLine})
				}
			}
		}
	}
}

// FuzzDecodeChunks: any input, cut anywhere, decodes in pieces as it does
// through a reader.
func FuzzDecodeChunks(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":"x"}`+"\n"+`{"a":2}`+"\r\n\n"+`bad`+"\n"+`{"b":"y"}`), []byte{3, 20, 0, 5})
	f.Add([]byte("\n\n{}"), []byte{1})
	f.Fuzz(func(t *testing.T, in, steps []byte) {
		var at []int
		a := 0
		for _, s := range steps {
			if a += int(s); a > len(in) {
				break
			}
			at = append(at, a)
		}
		checkChunked(t, string(in), at, DecodeOptions{Policy: Skip, BatchRows: 3})
	})
}

// TestStringsArena: rows decoded with the caller's string arena are the
// rows decoded without it, their strings intact until Reset (across more
// than one chunk of the arena and strings too long for one); after Reset
// the next input takes its strings from the same memory.
func TestStringsArena(t *testing.T) {
	var in strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&in, `{"user":"user-%d-%s","n":%d}`+"\n", i, strings.Repeat("x", i%50), i)
	}
	fmt.Fprintf(&in, `{"user":"%s"}`+"\n", strings.Repeat("long", arenaChunk/8)) // past a quarter of a chunk
	rows := func(opts DecodeOptions) []Row {
		var all []Row
		if _, err := DecodeColumns(strings.NewReader(in.String()), opts, func(cb *colbatch.Batch) error {
			all = append(all, cb.Rows()...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return all
	}
	want := rows(DecodeOptions{})
	var a Strings
	for round := range 3 {
		got := rows(DecodeOptions{Strings: &a, BatchRows: 1000})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: rows differ from the decoder's own arena's", round)
		}
		if round == 0 && len(a.chunks) < 2 {
			t.Fatalf("%d chunks: the test does not cross a chunk", len(a.chunks))
		}
		a.Reset()
	}
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: the allocations are not measured")
	}
	// Without the arena's reuse an input allocated its 160 KB of strings
	// again; the long string (32 KB) is allocated each time, and its line
	// some more.
	decode := func() {
		DecodeColumns(strings.NewReader(in.String()), DecodeOptions{Strings: &a}, func(*colbatch.Batch) error { return nil })
		a.Reset()
	}
	decode()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 20
	for range n {
		decode()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 96<<10 {
		t.Errorf("decoding with a reused arena allocated %d bytes per input", per)
	}
}
