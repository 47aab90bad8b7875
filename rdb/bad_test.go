package rdb

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// parseAll reads every key and every value; visit=false skips values.
func parseAll(p *Parser, visit bool) error {
	for p.Next() {
		if !visit {
			continue
		}
		if p.Entry().Type == String {
			if _, err := p.Value(); err != nil {
				return err
			}
			continue
		}
		if err := p.Visit(func(*Element) error { return nil }); err != nil {
			return err
		}
	}
	return p.Err()
}

// TestTruncatedEveryOffset cuts each file at every length: each prefix must
// fail with a *CorruptionError whose offset is within the prefix, never
// succeed, never panic, whether values are visited or skipped. The
// hand-built files and real fixtures up to 4 KiB are cut at every offset;
// larger fixtures (the work is quadratic) at every offset of their first
// 512 and last 64 bytes and every 101st in between.
func TestTruncatedEveryOffset(t *testing.T) {
	files := handmadeCorpus()
	for name, data := range fixtureFiles() {
		files[name] = data
	}
	for name, data := range files {
		for cut := range len(data) {
			if len(data) > 4096 && cut > 512 && cut < len(data)-64 && cut%101 != 0 {
				continue
			}
			prefix := data[:cut]
			for _, mode := range []string{"visit", "skip", "bytes", "filter"} {
				var err error
				switch mode {
				case "visit":
					err = parseAll(NewParser(bytes.NewReader(prefix), nil), true)
				case "skip":
					err = parseAll(NewParser(bytes.NewReader(prefix), nil), false)
				case "bytes":
					err = parseAll(NewBytesParser(prefix, nil), true)
				case "filter":
					err = parseAll(NewParser(bytes.NewReader(prefix), &Options{Filter: func(*Entry) bool { return false }}), false)
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					t.Fatalf("%s cut at %d (%s): err = %v, want a *CorruptionError", name, cut, mode, err)
				}
				if ce.Offset > int64(cut) {
					t.Fatalf("%s cut at %d (%s): offset %d past the end", name, cut, mode, ce.Offset)
				}
				if !errors.Is(err, ErrTruncated) && !(cut < 9 && errors.Is(err, ErrBadMagic)) {
					t.Fatalf("%s cut at %d (%s): err = %v, want ErrTruncated", name, cut, mode, err)
				}
			}
		}
		if err := parseAll(NewBytesParser(data, nil), true); err != nil {
			t.Fatalf("%s whole: %v", name, err)
		}
	}
}

// TestAdversarialReaders feeds the same files through readers that return
// one byte at a time, data together with io.EOF, half the requested bytes,
// and compares with the in-memory parse.
func TestAdversarialReaders(t *testing.T) {
	for name, data := range handmadeCorpus() {
		want, err := dumpParser(NewBytesParser(data, nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for rname, r := range map[string]io.Reader{
			"onebyte": iotest.OneByteReader(bytes.NewReader(data)),
			"dataerr": iotest.DataErrReader(bytes.NewReader(data)),
			"half":    iotest.HalfReader(bytes.NewReader(data)),
			"eofbyte": &oneByteReader{data: data},
		} {
			got, err := dumpParser(NewParser(r, &Options{BufferSize: 64}))
			if err != nil || got != want {
				t.Fatalf("%s via %s: err %v\ngot\n%s\nwant\n%s", name, rname, err, got, want)
			}
		}
	}
	// A read error from the source surfaces, wrapped with the offset.
	data := handmadeCorpus()["redis74-all"]
	err := parseAll(NewParser(iotest.TimeoutReader(bytes.NewReader(data)), &Options{BufferSize: 64}), true)
	var ce *CorruptionError
	if !errors.Is(err, iotest.ErrTimeout) || !errors.As(err, &ce) || ce.Offset != 64 {
		t.Fatalf("timeout reader: %v", err)
	}
	// A reader that never makes progress is an error, not a hang.
	err = parseAll(NewParser(zeroReader{}, nil), true)
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("no-progress reader: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestBadInput(t *testing.T) {
	f := func(name string, data []byte, opts *Options, want error) {
		t.Helper()
		for _, p := range []*Parser{NewParser(bytes.NewReader(data), opts), NewBytesParser(data, opts)} {
			err := parseAll(p, true)
			var ce *CorruptionError
			if !errors.Is(err, want) || !errors.As(err, &ce) {
				t.Errorf("%s: err = %v, want %v", name, err, want)
			}
		}
	}
	huge := newRDB(9).key(rdbString, "k").byte1(0x81).raw([]byte{0x10, 0, 0, 0, 0, 0, 0, 0}).raw([]byte("short"))
	f("64-bit length", huge.end(), nil, ErrTooLarge)
	big := newRDB(9).key(rdbString, "k").len(400 << 20).raw([]byte("short"))
	f("length past the end", big.end(), nil, ErrTruncated)
	f("MaxValueSize", newRDB(9).key(rdbString, "k").str(strings.Repeat("x", 100)).end(), &Options{MaxValueSize: 99}, ErrTooLarge)
	f("corrupt lzf", newRDB(9).key(rdbString, "k").lzfStr([]byte{2, 'a', 'b', 'c', 4 << 5, 9}, 9).end(), nil, ErrMalformed)
	f("lzf ratio", newRDB(9).key(rdbString, "k").lzfStr([]byte{0, 'a'}, 1000).end(), nil, ErrMalformed)
	f("bad length prefix", newRDB(9).key(rdbString, "k").byte1(0x82).end(), nil, ErrMalformed)
	f("bad string encoding", newRDB(9).key(rdbString, "k").byte1(0xC7).end(), nil, ErrMalformed)
	f("ziplist bytes", newRDB(9).key(rdbListZiplist, "k").str("\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff").end(), nil, ErrMalformed)
	lp := listpack("a", "b")
	lp[6] = 0xF0 // a 32-bit string length running past the end
	f("listpack entry", newRDB(11).key(rdbSetListpack, "k").str(string(lp)).end(), nil, ErrMalformed)
	f("intset width", newRDB(9).key(rdbSetIntset, "k").str(string(intset(3))).end(), nil, ErrMalformed)
	f("zset score", newRDB(9).key(rdbZSet, "k").len(1).str("m").byte1(3).raw([]byte("abc")).end(), nil, ErrMalformed)
	f("quicklist container", newRDB(11).key(rdbListQuicklist2, "k").len(1).len(7).str("x").end(), nil, ErrMalformed)
	f("module opcode", newRDB(9).key(rdbModule2, "k").len(1).len(9).end(), nil, ErrMalformed)
	f("stream node key", newRDB(9).key(rdbStreamListpacks, "k").len(1).str("short").str("x").end(), nil, ErrMalformed)
	f("unknown opcode", newRDB(9).byte1(30).end(), nil, ErrUnknownType)

	// The error names the key and where it was read.
	_, err := dump(newRDB(9).key(rdbString, "good").str("v").key(rdbSet, "bad\x00key").len(5).str("a").end(), nil)
	var ce *CorruptionError
	if !errors.As(err, &ce) || string(ce.Key) != "bad\x00key" || ce.Offset == 0 ||
		!strings.Contains(err.Error(), `key "bad\x00key" at offset`) {
		t.Fatalf("err = %v", err)
	}
}

// TestNoAttackerSizedAllocation declares a 400 MiB string in a tiny stream
// and checks that the parser allocates nothing like it.
func TestNoAttackerSizedAllocation(t *testing.T) {
	data := newRDB(9).key(rdbString, "k").len(400 << 20).raw(bytes.Repeat([]byte("x"), 1000)).end()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := parseAll(NewParser(bytes.NewReader(data), &Options{MaxValueSize: 1 << 30}), true)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("allocated %d bytes for a %d-byte file", grew, len(data))
	}
	// The same for a list claiming 2^40 elements.
	data = newRDB(9).key(rdbList, "k").len(1 << 40).str("a").end()
	runtime.ReadMemStats(&before)
	err = parseAll(NewParser(bytes.NewReader(data), nil), true)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrUnknownType) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("allocated %d bytes", grew)
	}
}

// TestChecksumLargeInputs covers the background checksum of large in-memory
// and mapped inputs: a good file passes, one flipped byte anywhere is caught,
// and abandoning or failing a parse stops the helper (goleak in TestMain).
func TestChecksumLargeInputs(t *testing.T) {
	data := syntheticRDB(45000) // ~17.5 MB, above crcWorkerMinLen
	if len(data) < crcWorkerMinLen {
		t.Fatalf("test file of %d bytes does not reach the helper's threshold", len(data))
	}
	if err := parseAll(NewBytesParser(data, nil), false); err != nil {
		t.Fatal(err)
	}
	flips := []int{len(data) / 2, len(data) - 20}
	if raceEnabled {
		flips = flips[1:] // 10x slower under -race; one flip still covers the helper
	}
	for _, at := range flips {
		bad := bytes.Clone(data)
		// Flip a byte inside a string value so the structure stays readable.
		i := bytes.Index(bad[at:], []byte("vvvv")) + at
		bad[i] = 'w'
		if err := parseAll(NewBytesParser(bad, nil), false); !errors.Is(err, ErrChecksum) {
			t.Fatalf("flip at %d: err = %v", i, err)
		}
		path := filepath.Join(t.TempDir(), "bad.rdb")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = parseAll(p, true)
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("mapped, flip at %d: err = %v", i, err)
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("error does not name the file: %v", err)
		}
		p.Close()
	}
	// Stop half way: Close must stop the helper.
	p := NewBytesParser(data, nil)
	for range 1000 {
		p.Next()
	}
	p.Close()
	// Fail half way: the helper stops too.
	trunc := data[:len(data)/2]
	if err := parseAll(NewBytesParser(trunc, nil), false); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
}

// TestOpenSmallFileAndClose: a small file is read, not mapped; after Close,
// Next returns false without inventing an error.
func TestOpenSmallFileAndClose(t *testing.T) {
	data := handmadeCorpus()["redis74-all"]
	path := filepath.Join(t.TempDir(), "small.rdb")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.mapping != nil {
		t.Fatal("a file under mmapMinSize was mapped")
	}
	if !p.Next() {
		t.Fatal(p.Err())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Next() || p.Err() != nil || p.Entry() != nil {
		t.Fatalf("after Close: Next true or err %v", p.Err())
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.rdb"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestStreamingChecksumHelper drives the streaming reader's background
// checksum through many buffer swaps, window growth for a 9 MiB value and the
// shrink after it: a good file passes, one flipped byte is caught.
func TestStreamingChecksumHelper(t *testing.T) {
	w := newRDB(11)
	for i := range 2000 {
		w.key(rdbString, "k"+strconv.Itoa(i)).str(strings.Repeat("v", i%700))
	}
	w.key(rdbString, "huge").str(strings.Repeat("h", 9<<20))
	for i := range 2000 {
		w.key(rdbList, "l"+strconv.Itoa(i)).len(2).str("a").str(strings.Repeat("b", i%300))
	}
	data := w.end()
	for _, size := range []int{64, 4096, 1 << 20} {
		if err := parseAll(NewParser(iotest.HalfReader(bytes.NewReader(data)), &Options{BufferSize: size}), size != 64); err != nil {
			t.Fatalf("buffer %d: %v", size, err)
		}
		if size != 4096 && raceEnabled {
			continue // the flips below at one window size are enough under -race
		}
		for _, at := range []int{100, len(data) / 2, len(data) - 30} {
			bad := bytes.Clone(data)
			i := bytes.IndexAny(bad[at:], "vhb") + at
			bad[i] ^= 0x20
			err := parseAll(NewParser(bytes.NewReader(bad), &Options{BufferSize: size}), at%2 == 0)
			if !errors.Is(err, ErrChecksum) {
				t.Fatalf("buffer %d, flip at %d: err = %v", size, i, err)
			}
		}
	}
}

// TestKeySurvivesRefills: the key is left in the window and moved out only
// when a refill comes; it must read the same after its value was decoded or
// skipped through many refills, and name the key in an error found late in
// a long value.
func TestKeySurvivesRefills(t *testing.T) {
	for name, data := range handmadeCorpus() {
		var want []string
		p := NewBytesParser(data, nil)
		for p.Next() {
			want = append(want, string(p.Entry().Key))
		}
		for _, visit := range []bool{true, false} {
			q := NewParser(iotest.OneByteReader(bytes.NewReader(data)), &Options{BufferSize: 64})
			var got []string
			for q.Next() {
				if visit {
					if q.Entry().Type == String {
						q.Value()
					} else {
						q.Visit(func(*Element) error { return nil })
					}
				}
				got = append(got, string(q.Entry().Key)) // read after the value
			}
			if q.Err() != nil || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("%s (visit %v): err %v\ngot  %q\nwant %q", name, visit, q.Err(), got, want)
			}
		}
	}
	w := newRDB(9).key(rdbList, "the-key").len(1000)
	for range 999 {
		w.str(strings.Repeat("x", 50))
	}
	data := w.byte1(0xC7).end() // a bad string encoding as the last item
	for _, filter := range []Filter{nil, func(*Entry) bool { return false }} {
		err := parseAll(NewParser(bytes.NewReader(data), &Options{BufferSize: 64, Filter: filter}), true)
		var ce *CorruptionError
		if !errors.As(err, &ce) || string(ce.Key) != "the-key" {
			t.Fatalf("filter %v: err %v", filter != nil, err)
		}
	}
}

// TestFlipUnderFilter flips bytes of the real fixtures that carry a
// checksum and parses each copy with filters that reject every key, so every
// value is skipped undecoded: each copy must fail, as it does without a
// filter, whichever reader parses it (streaming, in memory). Skipping does not
// look inside values, so only the CRC64 can catch a flipped byte there; a
// filter must not turn it off. The files are flipped at every byte (every
// 7th under -race), every other time with up to eight more flipped bytes at
// random offsets.
func TestFlipUnderFilter(t *testing.T) {
	rejectAll := func(*Entry) bool { return false }
	noPrefix := KeyPrefix("no key starts with this:")
	stride := 1
	if raceEnabled {
		stride = 7
	}
	rng := rand.New(rand.NewPCG(19, 21))
	files := 0
	for name, data := range fixtureFiles() {
		if strings.Contains(name, "nochecksum") {
			continue
		}
		files++
		if err := parseAll(NewParser(bytes.NewReader(data), &Options{Filter: rejectAll}), false); err != nil {
			t.Fatalf("%s unflipped: %v", name, err)
		}
		bad := bytes.Clone(data)
		for at := 0; at < len(data); at += stride {
			flips := []int{at}
			if at%2 == 1 {
				for range 1 + rng.IntN(8) {
					flips = append(flips, rng.IntN(len(data)))
				}
			}
			for _, i := range flips {
				bad[i] = data[i] ^ byte(1+rng.IntN(255))
			}
			// The readers and filters take turns: each covers a third of the offsets.
			var err error
			mode := []string{"streaming, reject all", "in memory, reject all", "streaming, unknown prefix"}[(at/stride)%3]
			switch (at / stride) % 3 {
			case 0:
				err = parseAll(NewParser(bytes.NewReader(bad), &Options{Filter: rejectAll, BufferSize: 512}), false)
			case 1:
				err = parseAll(NewBytesParser(bad, &Options{Filter: rejectAll}), false)
			case 2:
				err = parseAll(NewParser(bytes.NewReader(bad), &Options{Filter: noPrefix}), false)
			}
			if err == nil {
				unfiltered := parseAll(NewBytesParser(bad, nil), true)
				t.Fatalf("%s with bytes %v flipped: the %s parse passed (without a filter: %v)", name, flips, mode, unfiltered)
			}
			for _, i := range flips {
				bad[i] = data[i]
			}
		}
	}
	if files < 4 {
		t.Fatalf("%d fixtures with a checksum in testdata/redis, want at least 4", files)
	}
}
