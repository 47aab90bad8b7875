package rdb

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// lzfCompressForTest is a greedy LZF compressor in liblzf's format (one
// 3-byte hash per position, distances up to 8192, lengths up to 264), so
// tests can round-trip realistic data and cover every token shape.
func lzfCompressForTest(in []byte) []byte {
	var table [1 << 14]int // position+1 of the last occurrence of a 3-byte hash
	var out []byte
	litStart := 0
	flushLiterals := func(end int) {
		for litStart < end {
			n := min(32, end-litStart)
			out = append(out, byte(n-1))
			out = append(out, in[litStart:litStart+n]...)
			litStart += n
		}
	}
	for i := 0; i+2 < len(in); {
		h := (uint32(in[i])<<16 | uint32(in[i+1])<<8 | uint32(in[i+2])) * 2654435761 >> 18
		ref := table[h] - 1
		table[h] = i + 1
		if ref < 0 || i-ref > 8192 || in[ref] != in[i] || in[ref+1] != in[i+1] || in[ref+2] != in[i+2] {
			i++
			continue
		}
		n := 3
		for i+n < len(in) && n < 264 && in[ref+n] == in[i+n] {
			n++
		}
		flushLiterals(i)
		off, l := i-ref-1, n-2
		if l < 7 {
			out = append(out, byte(l<<5|off>>8))
		} else {
			out = append(out, byte(7<<5|off>>8), byte(l-7))
		}
		out = append(out, byte(off))
		i += n
		litStart = i
	}
	flushLiterals(len(in))
	return out
}

// lzfDecompressByteWise is the plain byte-at-a-time decoder lzfDecompress
// replaced; it is the reference the fast one is checked against.
func lzfDecompressByteWise(in, out []byte) error {
	ip, op := 0, 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 32 {
			for n := ctrl + 1; n > 0; n-- {
				if ip >= len(in) {
					return errLZFInput
				}
				if op >= len(out) {
					return errLZFOverflow
				}
				out[op] = in[ip]
				op++
				ip++
			}
			continue
		}
		n := ctrl >> 5
		ref := op - (ctrl&0x1f)<<8 - 1
		if n == 7 {
			if ip >= len(in) {
				return errLZFInput
			}
			n += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return errLZFInput
		}
		ref -= int(in[ip])
		ip++
		n += 2
		if op+n > len(out) {
			return errLZFOverflow
		}
		if ref < 0 {
			return errLZFBackref
		}
		for ; n > 0; n-- {
			out[op] = out[ref]
			op++
			ref++
		}
	}
	if op != len(out) {
		return errLZFShort
	}
	return nil
}

// jsonLikeText is seeded, realistic compressible data: JSON documents with
// repeating field names and varying values, as cached API responses are.
func jsonLikeText(size int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	var b strings.Builder
	for b.Len() < size {
		fmt.Fprintf(&b, `{"id":%d,"user":"%s_%d","email":"%s@example.com","score":%.3f,"active":%t,"tags":["%s","%s"],"bio":"%s %s %s"},`,
			rng.IntN(1_000_000), words[rng.IntN(len(words))], rng.IntN(10000), words[rng.IntN(len(words))],
			rng.Float64()*100, rng.IntN(2) == 0, words[rng.IntN(len(words))], words[rng.IntN(len(words))],
			words[rng.IntN(len(words))], words[rng.IntN(len(words))], strings.Repeat("=", rng.IntN(40)))
	}
	return []byte(b.String()[:size])
}

func TestLZFRoundTrip(t *testing.T) {
	random := make([]byte, 10000)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	cases := map[string][]byte{
		"json":       jsonLikeText(64<<10, 1),
		"json-small": jsonLikeText(700, 2),
		"run-1":      bytes.Repeat([]byte("a"), 1000),
		"run-2":      append([]byte("x"), bytes.Repeat([]byte("ab"), 500)...),
		"run-3":      bytes.Repeat([]byte("abc"), 333),
		"run-7":      bytes.Repeat([]byte("abcdefg"), 99),
		"run-9":      bytes.Repeat([]byte("abcdefghi"), 77),
		"run-31":     bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu"), 40),
		"random":     random,
		"tiny":       []byte("ab"),
		"far":        append(append(jsonLikeText(300, 3), random[:7000-300-300]...), jsonLikeText(300, 3)...),
	}
	for name, data := range cases {
		comp := lzfCompressForTest(data)
		if name == "json" && len(comp) > len(data)/2 {
			t.Errorf("%s: compressed %d of %d bytes: the test compressor finds too few matches", name, len(comp), len(data))
		}
		out := make([]byte, len(data))
		if err := lzfDecompress(comp, out); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(out, data) {
			t.Errorf("%s: round trip differs", name)
		}
		ref := make([]byte, len(data))
		if err := lzfDecompressByteWise(comp, ref); err != nil || !bytes.Equal(ref, data) {
			t.Errorf("%s: reference decoder: %v", name, err)
		}
	}
}

func TestLZFErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		n    int
		want error
	}{
		{"literal past input", []byte{4, 'a', 'b'}, 5, errLZFInput},
		{"literal past output", []byte{4, 'a', 'b', 'c', 'd', 'e'}, 4, errLZFOverflow},
		{"backref past output", []byte{2, 'a', 'b', 'c', 4 << 5, 2}, 8, errLZFOverflow},
		{"backref before start", []byte{0, 'a', 1 << 5, 1}, 4, errLZFBackref},
		{"backref missing offset", []byte{0, 'a', 1 << 5}, 4, errLZFInput},
		{"long backref missing length", []byte{0, 'a', 7 << 5}, 40, errLZFInput},
		{"output short", []byte{1, 'a', 'b'}, 3, errLZFShort},
	}
	for _, c := range cases {
		out := make([]byte, c.n, c.n+64)
		canary := out[c.n : c.n+64]
		for i := range canary {
			canary[i] = 0xAA
		}
		err := lzfDecompress(c.in, out)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		for i, b := range canary {
			if b != 0xAA {
				t.Errorf("%s: wrote past the declared length at %d", c.name, c.n+i)
				break
			}
		}
	}
}

func BenchmarkLZFDecompress(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		data := jsonLikeText(size, 1)
		comp := lzfCompressForTest(data)
		out := make([]byte, len(data))
		b.Run(fmt.Sprintf("json-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := lzfDecompress(comp, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A run of a 2-byte pattern as liblzf encodes it: "ab", then maximal
	// back references at distance 2 (each overlapping its own output).
	data := bytes.Repeat([]byte("ab"), 32<<10)
	comp := []byte{1, 'a', 'b'}
	for left := len(data) - 2; left > 0; left -= 264 {
		if n := min(left, 264); n >= 9 {
			comp = append(comp, 7<<5, byte(n-9), 1)
		} else {
			comp = append(comp, byte((n-2)<<5), 1)
		}
	}
	out := make([]byte, len(data))
	b.Run("run-2", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := lzfDecompress(comp, out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
