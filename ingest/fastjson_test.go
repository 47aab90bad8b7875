package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
)

var fastSeeds = []string{
	`{"a":1,"b":-2.5,"c":"x","d":true,"e":false,"f":null,"g":-42}`,
	` { "a" : 9223372036854775807 , "b":9223372036854775808, "c": -0, "d": 1e3, "e": 0.1 } `,
	`{"s":"caf\u00e9","t":"tab\there"}`,
	`{"n":{"x":1},"l":[1,2]}`,
	`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1,}`, `{"a" 1}`, `{}`, `{"a":1}x`, `[1]`, `{"a":"\xff"}`,
	`{"a":"é"}`, `{"a":1,"a":2}`, `{"a":tru}`, `{"a":1e}`, `{"a":"x`,
}

func TestFastRowMatchesSlow(t *testing.T) {
	for _, s := range fastSeeds {
		checkFastRow(t, []byte(s))
	}
	var d rowDecoder
	if _, ok := d.fast([]byte(`{"a":1,"b":"x","c":2.5,"d":null,"e":true}`)); !ok {
		t.Fatal("a flat row took the slow path")
	}
	if _, ok := d.fast([]byte(`{"a":{"b":1}}`)); ok {
		t.Fatal("a nested row took the fast path")
	}
}

func checkFastRow(t *testing.T, b []byte) {
	var d rowDecoder
	got, gerr := d.decode(b)
	if !utf8.Valid(b) {
		// A line that is not UTF-8 is a bad line here, where encoding/json
		// (compute.DecodeRow) would store U+FFFD in place of its bytes.
		if !errors.Is(gerr, ErrInvalidUTF8) {
			t.Fatalf("%q: fast %#v %v, want ErrInvalidUTF8", b, got, gerr)
		}
		return
	}
	want, werr := compute.DecodeRow(b)
	if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast %#v %v, slow %#v %v", b, got, gerr, want, werr)
	}
	// Again with the same decoder: it now expects b's keys.
	if again, err := d.decode(b); (err == nil) != (werr == nil) || !reflect.DeepEqual(again, want) {
		t.Fatalf("%q: fast (keys expected) %#v %v, slow %#v %v", b, again, err, want, werr)
	}
	checkColumnRow(t, b, got, gerr)
}

// checkColumnRow: the column decoder takes and refuses what the map
// decoder does, and its row is the same (after a row of other keys, so
// that columns absent from b are present in the batch).
func checkColumnRow(t *testing.T, b []byte, want Row, werr error) {
	cd := &colDecoder{b: new(colbatch.Batch)}
	if err := cd.decode([]byte(`{"zz":1,"a":"x"}`), 1); err != nil {
		t.Fatal(err)
	}
	err := cd.decode(b, 2)
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("%q: columns error %v, rows error %v", b, err, werr)
	}
	if err != nil {
		if cd.b.Len != 1 {
			t.Fatalf("%q: a bad line left a row", b)
		}
		return
	}
	if got := cd.b.Rows()[1]; cd.b.Len != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: columns %#v, rows %#v", b, got, want)
	}
	// Again: the decoder now expects b's keys.
	if err := cd.decode(b, 3); err != nil {
		t.Fatalf("%q: columns (keys expected): %v", b, err)
	}
	if got := cd.b.Rows()[2]; cd.b.Len != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: columns (keys expected) %#v, rows %#v", b, got, want)
	}
}

// FuzzFastRow: the fast path returns what compute.DecodeRow returns.
func FuzzFastRow(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastRow(t, b) })
}

// TestFastRowKeyOrderChanges: one decoder across rows whose keys change
// order, number and spelling returns what compute.DecodeRow returns.
func TestFastRowKeyOrderChanges(t *testing.T) {
	var d rowDecoder
	for _, s := range []string{
		`{"a":1,"b":2,"c":3}`, `{"a":1,"b":2,"c":3}`, `{"b":1,"a":2}`, `{"a":1,"bb":2,"c":3,"d":4}`, `{}`, `{"c":"x","a":null}`,
		`{"a":1,"b":{"n":1}}`, `{"a":1,"b":2,"c":3}`,
	} {
		got, err := d.decode([]byte(s))
		want, werr := compute.DecodeRow([]byte(s))
		if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %#v %v, want %#v %v", s, got, err, want, werr)
		}
	}
}

// TestFastRowValueCache: one decoder over rows whose string values repeat
// (cached) or never repeat (the cache turns off) returns the same rows as
// compute.DecodeRow, and repeated values stop allocating.
func TestFastRowValueCache(t *testing.T) {
	var d rowDecoder
	for i := 0; i < 2*maxValues+10; i++ {
		s := fmt.Sprintf(`{"country":"%s","id":"id-%d","k":"x"}`, []string{"SG", "ID", "MY"}[i%3], i)
		if i == 7 {
			s = fmt.Sprintf(`{"id":"id-%d","country":"SG"}`, i) // keys move: caches reset
		}
		got, err := d.decode([]byte(s))
		want, _ := compute.DecodeRow([]byte(s))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %#v %v, want %#v", s, got, err, want)
		}
	}
	if !d.values[1].off || d.values[0].off || len(d.values[0].vals) != 3 {
		t.Fatalf("caches: country %+v, id off=%v", d.values[0], d.values[1].off)
	}
	line := []byte(`{"country":"SG","id":"x","k":"x"}`)
	d.decode(line)
	if n := testing.AllocsPerRun(100, func() { d.decode(line) }); n > 4 {
		t.Errorf("%v allocations per row of cached values, want the map and one string at most", n)
	}
}

var numberSeeds = []string{
	"0", "-0", "0.0", "-0.0", "1.5", "-2.25", "123.45", "0.1", "0.3", "1e22", "1e23", "1e-22", "1e-23",
	"9007199254740992", "9007199254740993", "9007199254740992.5", "4.35", "1.7976931348623157e308",
	"1e309", "-1e309", "4.9e-324", "1e-400", "12345678901234567890.5", "0.000000000000000000001234",
	"1E+2", "1e-05", "3.0e+000", "123456789012345678e-5", "7.038531e-26", "1e00000000000000000001",
	"999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807",
	"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "-", "01", "1.", ".5", "1e", "1e+",
	"-a", "1.5x", "--1", "+1",
}

// jsonNumber is the JSON number grammar (RFC 8259).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// TestScanNumberMatchesStrconv: scanNumber takes the JSON numbers, and only
// them; its integers are strconv.ParseInt's (json.Number beyond int64:
// not ok), its floats strconv.ParseFloat's bit for bit (not ok out of
// range), and -0 is a float.
func TestScanNumberMatchesStrconv(t *testing.T) {
	for _, s := range numberSeeds {
		checkScanNumber(t, []byte(s))
	}
}

func checkScanNumber(t *testing.T, b []byte) {
	end, kind, x, ok := scanNumber(b, 0)
	if !jsonNumber.Match(b) {
		if ok && end == len(b) {
			t.Fatalf("scanNumber(%q) took it whole (%v %#x), not a JSON number", b, kind, x)
		}
		return
	}
	if ok && end != len(b) {
		t.Fatalf("scanNumber(%q) ended at %d", b, end)
	}
	if !bytes.ContainsAny(b, ".eE") && string(b) != "-0" {
		want, err := strconv.ParseInt(string(b), 10, 64)
		if ok != (err == nil) || ok && (kind != colbatch.Int || x != want) {
			t.Fatalf("scanNumber(%q) = %v %d, %v; strconv: %d, %v", b, kind, x, ok, want, err)
		}
		return
	}
	want, err := strconv.ParseFloat(string(b), 64)
	// A float that float64 would round goes to the slow path, which keeps
	// its text (a decimal column takes it exactly).
	if ok != (err == nil && compute.FloatKeepsText(string(b), want)) || ok && (kind != colbatch.Float || uint64(x) != math.Float64bits(want)) {
		t.Fatalf("scanNumber(%q) = %v %v (%#x), %v; strconv: %v (%#x), %v", b, kind, math.Float64frombits(uint64(x)), x, ok, want, math.Float64bits(want), err)
	}
}

// FuzzScanNumber: scanNumber is strconv for every JSON number and takes
// nothing else.
func FuzzScanNumber(f *testing.F) {
	for _, s := range numberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanNumber)
}

// plainStringBytewise is plainString one byte at a time (what it was).
func plainStringBytewise(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return 0, 0, false
			}
			return i + 1, j, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// TestPlainStringEveryByte: plainString, which reads 8 bytes at a time,
// stops where the bytewise scan stops for every byte value at every
// position of a word, before and after another special byte.
func TestPlainStringEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 1; pos < 20; pos++ {
			for _, after := range []string{`"`, `\"`, "\x01\"", "é\"", "\xff\"", "abcdefghijklmnopq\""} {
				b := []byte(`"` + strings.Repeat("a", pos-1))
				b = append(b, byte(c))
				b = append(b, after...)
				s, e, ok := plainString(b, 0)
				ws, we, wok := plainStringBytewise(b, 0)
				if s != ws || e != we || ok != wok {
					t.Fatalf("%q: plainString %d, %d, %v; bytewise %d, %d, %v", b, s, e, ok, ws, we, wok)
				}
			}
		}
	}
}

// TestExpectedKeys: decoders primed with a row's keys (so that they expect
// them) take and refuse what compute.DecodeRow does for rows whose key at
// that position is the same, one byte longer or shorter, unterminated,
// followed by space, or escaped, for keys of every length around the
// 8-byte comparison.
func TestExpectedKeys(t *testing.T) {
	for n := range 10 {
		k := "abcdefghij"[:n]
		variants := []string{`"` + k + `"`, `"` + k + `X"`, `"` + k + `X`, `"` + k + `" `, `"` + k + `\u0041"`, `"` + k + `""`}
		if n > 0 {
			variants = append(variants, `"`+k[:n-1]+`"`, `"`+k[:n-1]+`Z"`, `"`+k[:n-1])
		}
		for _, v := range variants {
			for _, row := range []string{`{` + v + `:2}`, `{` + v + `:2,"tail":"0123456789"}`, `{"p":1,` + v + `:2}`,
				`{"p":1,` + v + `:2,"tail":"0123456789"}`, `{` + v + `:"long value"}`, `{` + v + `:2 }`, `{` + v, `{` + v + `          `} {
				prime := `{"` + k + `":1,"tail":"x"}`
				if strings.HasPrefix(row, `{"p":1,`) {
					prime = `{"p":0,"` + k + `":1,"tail":"x"}`
				}
				checkPrimed(t, []byte(prime), []byte(row))
			}
		}
	}
}

// checkPrimed decodes prime, then b, with one decoder of each kind, and
// compares b's row with compute.DecodeRow's.
func checkPrimed(t *testing.T, prime, b []byte) {
	t.Helper()
	want, werr := compute.DecodeRow(b)
	var d rowDecoder
	if _, err := d.decode(prime); err != nil {
		t.Fatal(err)
	}
	got, err := d.decode(b)
	if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q after %q: fast %#v %v, slow %#v %v", b, prime, got, err, want, werr)
	}
	cd := &colDecoder{b: new(colbatch.Batch)}
	if err := cd.decode(prime, 1); err != nil {
		t.Fatal(err)
	}
	err = cd.decode(b, 2)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("%q after %q: columns error %v, rows error %v", b, prime, err, werr)
	}
	if err == nil {
		if got := cd.b.Rows()[1]; !reflect.DeepEqual(got, want) {
			t.Fatalf("%q after %q: columns %#v, rows %#v", b, prime, got, want)
		}
	}
}
