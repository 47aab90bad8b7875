package rdbtool

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestMallocSize(t *testing.T) {
	f := func(n, want int64) {
		t.Helper()
		if got := mallocSize(n); got != want {
			t.Errorf("mallocSize(%d) = %d, want %d", n, got, want)
		}
	}
	// jemalloc 5.3 x86-64 size classes.
	f(1, 8)
	f(8, 8)
	f(9, 16)
	f(24, 32)
	f(48, 48)
	f(129, 160)
	f(256, 256)
	f(257, 320)
	f(4097, 5120)
	f(1<<20+1, 1<<20+1<<18)
}

func TestListpackEntrySize(t *testing.T) {
	f := func(s string, want int64) {
		t.Helper()
		if got := listpackEntrySize([]byte(s)); got != want {
			t.Errorf("listpackEntrySize(%q) = %d, want %d", s, got, want)
		}
	}
	f("5", 2)      // 7-bit uint + backlen
	f("-5", 3)     // 13-bit int
	f("100000", 5) // 24-bit int
	f("05", 4)     // not canonical: a 2-byte string
	f("hello", 7)
	f(string(bytes.Repeat([]byte("x"), 100)), 103)
}

// estimate runs one key through keyEstimate.
func estimateHash(n, valueLen int) (int64, string) {
	var e keyEstimate
	e.start(memHash, []byte("h"), false)
	v := bytes.Repeat([]byte("v"), valueLen)
	for i := 0; i < n; i++ {
		e.hashField([]byte("field"+strconv.Itoa(i)), v)
	}
	return e.finish()
}

func TestEstimateGrowsWithValue(t *testing.T) {
	small, enc := estimateHash(10, 10)
	if enc != "listpack" {
		t.Errorf("10 short fields: encoding %s, want listpack", enc)
	}
	bigger, _ := estimateHash(100, 10)
	table, enc := estimateHash(200, 10)
	if enc != "hashtable" {
		t.Errorf("200 fields: encoding %s, want hashtable", enc)
	}
	if !(small < bigger && bigger < table) {
		t.Errorf("estimates not increasing with size: %d, %d, %d", small, bigger, table)
	}
	if _, enc := estimateHash(5, 100); enc != "hashtable" {
		t.Errorf("a 100-byte value: encoding %s, want hashtable", enc)
	}

	var e keyEstimate
	e.start(memString, []byte("k"), false)
	e.stringValue([]byte("12345"))
	intSize, enc := e.finish()
	if enc != "int" {
		t.Errorf("encoding of 12345: %s", enc)
	}
	e.start(memString, []byte("k"), true)
	e.stringValue(bytes.Repeat([]byte("x"), 1000))
	rawSize, enc := e.finish()
	if enc != "raw" || rawSize < 1000 || rawSize <= intSize {
		t.Errorf("1000-byte string: %d bytes %s", rawSize, enc)
	}

	e.start(memSet, []byte("s"), false)
	for i := 0; i < 100; i++ {
		e.member([]byte(strconv.Itoa(i)))
	}
	if n, enc := e.finish(); enc != "intset" || n > 1000 {
		t.Errorf("100 small ints: %d bytes %s", n, enc)
	}

	e.start(memList, []byte("l"), false)
	for i := 0; i < 10000; i++ {
		e.member(bytes.Repeat([]byte("x"), 50))
	}
	if n, enc := e.finish(); enc != "quicklist" || n < 10000*50 || n > 10000*60 || e.nodes < 60 {
		t.Errorf("10000 50-byte items: %d bytes %s in %d nodes", n, enc, e.nodes)
	}
}

func TestParseInt(t *testing.T) {
	f := func(s string, want int64, ok bool) {
		t.Helper()
		got, gotOK := parseInt([]byte(s))
		if gotOK != ok || (ok && got != want) {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", s, got, gotOK, want, ok)
		}
	}
	f("0", 0, true)
	f("-1", -1, true)
	f("9223372036854775807", 9223372036854775807, true)
	f("-9223372036854775808", -9223372036854775808, true)
	f("9223372036854775808", 0, false)
	f("-0", 0, false)
	f("01", 0, false)
	f("", 0, false)
	f("-", 0, false)
	f("1a", 0, false)
	f("99999999999999999999", 0, false)
	if n := testing.AllocsPerRun(100, func() {
		var e keyEstimate
		e.start(memZSet, []byte("k"), true)
		e.zsetMember([]byte("member-with-a-long-enough-name-to-escape"), 1.5)
		e.member([]byte("12345678901234567890123456789012345"))
		e.hashField([]byte("f"), []byte("v"))
		e.finish()
	}); n != 0 {
		t.Errorf("estimating allocates %v times per key, want 0", n)
	}
}

// TestKeyLineRoundTrips: every listed key reads back to its exact bytes,
// plain as it is or through strconv.Unquote when quoted.
func TestKeyLineRoundTrips(t *testing.T) {
	for _, k := range []string{"user:1", "héllo", "", "with space", "tab\there", "nl\nx", "\x00\xff", "\"quoted\"", "del\x7f"} {
		line := string(appendKeyLine(nil, []byte(k)))
		if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
			t.Errorf("key %q: line %q is not one line", k, line)
			continue
		}
		body := strings.TrimSuffix(line, "\n")
		got := body
		if strings.HasPrefix(body, "\"") {
			var err error
			if got, err = strconv.Unquote(body); err != nil {
				t.Errorf("key %q: %q does not unquote: %v", k, body, err)
			}
		}
		if got != k {
			t.Errorf("key %q listed as %q", k, body)
		}
	}
}
