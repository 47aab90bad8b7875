package rdb

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var rewriteCorpus = flag.Bool("rewrite-corpus", false, "rewrite testdata/fuzz seed files from the hand-built corpus")

// addSeeds gives a fuzz target the hand-built files and the real fixtures;
// the same files are committed under testdata/fuzz (see TestFuzzCorpus).
func addSeeds(f *testing.F) {
	for _, data := range handmadeCorpus() {
		f.Add(data)
	}
	for _, data := range fixtureFiles() {
		f.Add(data)
	}
}

// FuzzParse checks that no input panics, and that the streaming and the
// in-memory readers agree: same keys and elements when both succeed, and
// one never succeeds where the other fails.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := &Options{MaxValueSize: 1 << 20, BufferSize: 64}
		streamed, errS := dumpKeyAfter(NewParser(bytes.NewReader(data), opts))
		mapped, errB := dumpKeyAfter(NewBytesParser(data, opts))
		if (errS == nil) != (errB == nil) {
			t.Fatalf("streaming err %v, in-memory err %v", errS, errB)
		}
		if errS == nil && streamed != mapped {
			t.Fatalf("streaming and in-memory parses differ:\n%s\n---\n%s", streamed, mapped)
		}
	})
}

// dumpKeyAfter is dumpParser plus each key printed again after its value
// was read, when the streaming reader may have refilled its window.
func dumpKeyAfter(p *Parser) (string, error) {
	var sb bytes.Buffer
	for p.Next() {
		e := p.Entry()
		fmt.Fprintf(&sb, "%d %q %s %s %d\n", e.DB, e.Key, e.Type, e.Encoding, e.ExpireAt)
		if e.Type == String {
			v, err := p.Value()
			if err != nil {
				return sb.String(), err
			}
			fmt.Fprintf(&sb, "  %q\n", v)
		} else if err := p.Visit(func(el *Element) error {
			sb.WriteString("  " + renderElement(el) + "\n")
			return nil
		}); err != nil {
			return sb.String(), err
		}
		fmt.Fprintf(&sb, "end %q\n", p.Entry().Key)
	}
	return sb.String(), p.Err()
}

// FuzzSkip checks that skipping values agrees with decoding them, and that
// a filter changes which keys are seen, never whether the input is accepted:
//
//   - a full decode with a filter that accepts every key sees the same keys
//     and fails the same way as one without a filter;
//   - a pass that skips every value and one whose filter rejects every key
//     fail or succeed together (with the same error kind);
//   - whenever the full decode succeeds, both skip passes succeed and see the
//     same keys; whenever it fails on the checksum, both fail on it too (a
//     skipped value is still summed).
//
// A skip pass may succeed where the full decode fails: skipping does not
// look inside values, and without a checksum nothing else catches a value
// whose inside is malformed.
func FuzzSkip(f *testing.F) {
	addSeeds(f)
	// The fixtures with one byte of a value flipped: a seed run (plain go
	// test) then checks the checksum under a filter without fuzzing.
	for name, data := range fixtureFiles() {
		if !strings.Contains(name, "nochecksum") {
			bad := bytes.Clone(data)
			bad[len(bad)/2] ^= 0x10
			f.Add(bad)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decode := func(filter Filter) ([]string, error) {
			var keys []string
			p := NewBytesParser(data, &Options{MaxValueSize: 1 << 20, Filter: filter})
			for p.Next() {
				keys = append(keys, string(p.Entry().Key))
				var err error
				if p.Entry().Type == String {
					_, err = p.Value()
				} else {
					err = p.Visit(func(*Element) error { return nil })
				}
				if err != nil {
					return keys, err
				}
			}
			return keys, p.Err()
		}
		full, fullErr := decode(nil)
		all, allErr := decode(func(*Entry) bool { return true })
		if fmt.Sprint(all) != fmt.Sprint(full) || errKind(allErr) != errKind(fullErr) {
			t.Fatalf("accept-all filter: %d keys, err %v; without a filter: %d keys, err %v", len(all), allErr, len(full), fullErr)
		}
		var skipped []string
		q := NewParser(bytes.NewReader(data), &Options{MaxValueSize: 1 << 20, BufferSize: 64})
		for q.Next() {
			skipped = append(skipped, string(q.Entry().Key))
		}
		skipErr := q.Err()
		reject := NewParser(bytes.NewReader(data), &Options{MaxValueSize: 1 << 20, BufferSize: 64, Filter: func(*Entry) bool { return false }})
		if reject.Next() {
			t.Fatalf("reject-all pass returned key %q", reject.Entry().Key)
		}
		rejectErr := reject.Err()
		if errKind(rejectErr) != errKind(skipErr) {
			t.Fatalf("reject-all pass: err %v; unfiltered skip pass: err %v", rejectErr, skipErr)
		}
		switch {
		case fullErr == nil:
			if skipErr != nil || fmt.Sprint(skipped) != fmt.Sprint(full) {
				t.Fatalf("skip pass: err %v, keys %q, want %q", skipErr, skipped, full)
			}
		case errors.Is(fullErr, ErrChecksum):
			if !errors.Is(skipErr, ErrChecksum) || !errors.Is(rejectErr, ErrChecksum) {
				t.Fatalf("full decode: %v; skip pass: %v; reject-all pass: %v", fullErr, skipErr, rejectErr)
			}
		}
	})
}

// errKind names the sentinel an error of the parser wraps ("" for nil), so
// that two passes can be compared whatever offset or key their errors name.
func errKind(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range []error{ErrBadMagic, ErrUnsupportedVersion, ErrUnknownType, ErrChecksum, ErrTruncated, ErrTooLarge, ErrMalformed} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

// FuzzLZF checks the decompressor against arbitrary input and sizes.
func FuzzLZF(f *testing.F) {
	f.Add([]byte{2, 'a', 'b', 'c', 4 << 5, 2}, uint16(9))
	f.Add([]byte{0, 'a', 0xE0, 0xFF, 0}, uint16(300))
	f.Add(lzfCompressForTest(jsonLikeText(2000, 1)), uint16(2000))
	f.Add(lzfCompressForTest(bytes.Repeat([]byte("abc"), 100)), uint16(300))
	f.Fuzz(func(t *testing.T, in []byte, n uint16) {
		// Spare capacity past the declared length must stay untouched.
		out := make([]byte, n, int(n)+300)
		guard := out[n : int(n)+300]
		for i := range guard {
			guard[i] = 0xAA
		}
		err := lzfDecompress(in, out)
		for i, b := range guard {
			if b != 0xAA {
				t.Fatalf("wrote past the declared length %d at %d", n, int(n)+i)
			}
		}
		ref := make([]byte, n)
		refErr := lzfDecompressByteWise(in, ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("err %v, reference decoder %v", err, refErr)
		}
		if err == nil && !bytes.Equal(out, ref) {
			t.Fatalf("output differs from the reference decoder")
		}
	})
}

// TestFuzzCorpus checks that the committed seed corpus is the hand-built
// corpus (run with -rewrite-corpus after changing handmadeCorpus).
func TestFuzzCorpus(t *testing.T) {
	c := handmadeCorpus()
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, target := range []string{"FuzzParse", "FuzzSkip"} {
		dir := filepath.Join("testdata", "fuzz", target)
		for _, n := range names {
			want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(c[n])) + ")\n"
			path := filepath.Join(dir, "handmade-"+n)
			if *rewriteCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s is missing or stale (err %v); run go test -run TestFuzzCorpus ./rdb/ -args -rewrite-corpus", path, err)
			}
		}
	}
}
