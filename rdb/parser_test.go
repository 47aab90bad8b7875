package rdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// dump parses data completely and renders every key and element as text.
func dump(data []byte, opts *Options) (string, error) {
	return dumpParser(NewParser(bytes.NewReader(data), opts))
}

func dumpParser(p *Parser) (string, error) {
	var sb strings.Builder
	for p.Next() {
		e := p.Entry()
		fmt.Fprintf(&sb, "db=%d key=%q type=%s enc=%s", e.DB, e.Key, e.Type, e.Encoding)
		if e.ExpireAt != 0 {
			fmt.Fprintf(&sb, " exp=%d", e.ExpireAt)
		}
		if e.Idle >= 0 {
			fmt.Fprintf(&sb, " idle=%d", e.Idle)
		}
		if e.Freq >= 0 {
			fmt.Fprintf(&sb, " freq=%d", e.Freq)
		}
		if e.Slot >= 0 {
			fmt.Fprintf(&sb, " slot=%d", e.Slot)
		}
		if e.Module != "" {
			fmt.Fprintf(&sb, " module=%s", e.Module)
		}
		if e.Type == String {
			v, err := p.Value()
			if err != nil {
				return sb.String(), err
			}
			fmt.Fprintf(&sb, " value=%q\n", v)
			continue
		}
		sb.WriteString("\n")
		err := p.Visit(func(el *Element) error {
			sb.WriteString("  " + renderElement(el) + "\n")
			return nil
		})
		if err != nil {
			return sb.String(), err
		}
	}
	return sb.String(), p.Err()
}

func renderElement(el *Element) string {
	switch el.Kind {
	case ListItem, SetMember:
		return fmt.Sprintf("%s %q", el.Kind, el.Member)
	case ZSetMember:
		return fmt.Sprintf("%s %q %s", el.Kind, el.Member, strconv.FormatFloat(el.Score, 'g', -1, 64))
	case HashField:
		if el.ExpireAt != 0 {
			return fmt.Sprintf("%s %q=%q exp=%d", el.Kind, el.Member, el.Value, el.ExpireAt)
		}
		return fmt.Sprintf("%s %q=%q", el.Kind, el.Member, el.Value)
	case StreamEntry:
		return fmt.Sprintf("%s %s %q", el.Kind, el.ID, el.Fields)
	case StreamInfo:
		s := el.Stream
		return fmt.Sprintf("%s len=%d last=%s first=%s maxdel=%s added=%d", el.Kind, s.Length, s.LastID, s.FirstID, s.MaxDeletedID, s.EntriesAdded)
	case StreamGroup:
		return fmt.Sprintf("%s %q last=%s read=%d", el.Kind, el.Member, el.ID, el.Stream.EntriesRead)
	case StreamPending:
		return fmt.Sprintf("%s %q %s t=%d n=%d", el.Kind, el.Group, el.ID, el.DeliveryTime, el.DeliveryCount)
	case StreamConsumer:
		return fmt.Sprintf("%s %q/%q seen=%d active=%d", el.Kind, el.Group, el.Member, el.SeenTime, el.ActiveTime)
	case StreamConsumerPending:
		return fmt.Sprintf("%s %q/%q %s", el.Kind, el.Group, el.Member, el.ID)
	case ModuleItem:
		switch el.ModuleOpcode {
		case ModuleString:
			return fmt.Sprintf("%s string %q", el.Kind, el.Member)
		case ModuleFloat, ModuleDouble:
			return fmt.Sprintf("%s float %g", el.Kind, el.Score)
		default:
			return fmt.Sprintf("%s int %d", el.Kind, el.Int)
		}
	}
	return "?"
}

// check parses data with every reader flavour (streaming, one byte at a
// time, in-memory) and compares the dump with want.
func check(t *testing.T, data []byte, want string) {
	t.Helper()
	want = strings.TrimLeft(want, "\n")
	for _, mode := range []string{"stream", "onebyte", "bytes", "tinybuf"} {
		var p *Parser
		switch mode {
		case "stream":
			p = NewParser(bytes.NewReader(data), nil)
		case "onebyte":
			p = NewParser(&oneByteReader{data: data}, nil)
		case "bytes":
			p = NewBytesParser(data, nil)
		case "tinybuf":
			p = NewParser(bytes.NewReader(data), &Options{BufferSize: 64})
		}
		got, err := dumpParser(p)
		if err != nil {
			t.Fatalf("%s: parse error: %v\ngot so far:\n%s", mode, err, got)
		}
		if got != want {
			t.Fatalf("%s: got\n%s\nwant\n%s", mode, got, want)
		}
	}
}

// oneByteReader returns one byte per Read, with io.EOF alongside the last.
type oneByteReader struct {
	data []byte
}

func (r *oneByteReader) Read(b []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if len(b) == 0 {
		return 0, nil
	}
	b[0] = r.data[0]
	r.data = r.data[1:]
	if len(r.data) == 0 {
		return 1, io.EOF
	}
	return 1, nil
}

func TestCRC64Jones(t *testing.T) {
	// The check value in Redis's crc64.c test.
	if got := crc64Update(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64(123456789) = %x", got)
	}
	long := bytes.Repeat([]byte("0123456789abcdef!"), 5000) // several three-lane blocks and a tail
	var bytewise uint64
	for _, c := range long {
		bytewise = crc64Update(bytewise, []byte{c})
	}
	if whole := crc64Update(0, long); whole != bytewise {
		t.Fatalf("three-lane %x != bytewise %x", whole, bytewise)
	}
	if split := crc64Update(crc64Update(7, long[:12345]), long[12345:]); split != crc64Update(7, long) {
		t.Fatalf("split update %x != whole", split)
	}
}

func TestStringsAndOpcodes(t *testing.T) {
	w := newRDB(9).aux("redis-ver", "5.0.0").aux("redis-bits", "64")
	w.selectDB(0).byte1(opResizeDB).len(3).len(1)
	w.key(rdbString, "plain").str("hello")
	w.byte1(opExpireTimeMs).u64le(1700000000123).key(rdbString, "int8").intStr(-5)
	w.byte1(opExpireTime).u32le(1700000000).key(rdbString, "int16").intStr(1234)
	w.byte1(opIdle).len(77).key(rdbString, "int32").intStr(-100000)
	// LZF: literal "abc", then a back reference of length 6 at distance 3
	// (ctrl 0x80|0: len field 4 => 4+2 = 6, offset 2 => distance 3).
	w.byte1(opFreq).byte1(9).key(rdbString, "lzf").lzfStr([]byte{2, 'a', 'b', 'c', 4 << 5, 2}, 9)
	w.aux("between", "keys")
	w.selectDB(3).key(rdbString, strings.Repeat("k", 70)).str(strings.Repeat("v", 20000))
	data := w.end()
	check(t, data, `
db=0 key="plain" type=string enc=string value="hello"
db=0 key="int8" type=string enc=string exp=1700000000123 value="-5"
db=0 key="int16" type=string enc=string exp=1700000000000 value="1234"
db=0 key="int32" type=string enc=string idle=77 value="-100000"
db=0 key="lzf" type=string enc=string freq=9 value="abcabcabc"
db=3 key="`+strings.Repeat("k", 70)+`" type=string enc=string value="`+strings.Repeat("v", 20000)+`"
`)
	p := NewBytesParser(data, nil)
	for p.Next() {
	}
	h := p.Header()
	if p.Err() != nil || h.Magic != "REDIS" || h.Version != 9 || len(h.Aux) != 3 || h.Aux[2] != (AuxField{"between", "keys"}) {
		t.Fatalf("header %+v err %v", h, p.Err())
	}
}

func TestCollections(t *testing.T) {
	w := newRDB(9)
	w.key(rdbList, "list").len(3).str("a").intStr(7).str("c")
	w.key(rdbSet, "set").len(2).str("x").str("y")
	w.key(rdbZSet, "zset").len(5).str("a").byte1(3).raw([]byte("1.5")).str("nan").byte1(253).
		str("pinf").byte1(254).str("ninf").byte1(255).str("e").byte1(5).raw([]byte("-2e10"))
	w.key(rdbZSet2, "zset2").len(2).str("m").u64le(math.Float64bits(2.25)).str("i").u64le(math.Float64bits(math.Inf(-1)))
	w.key(rdbHash, "hash").len(2).str("f1").str("v1").str("f2").intStr(300)
	check(t, w.end(), `
db=0 key="list" type=list enc=list
  list-item "a"
  list-item "7"
  list-item "c"
db=0 key="set" type=set enc=set
  set-member "x"
  set-member "y"
db=0 key="zset" type=zset enc=zset
  zset-member "a" 1.5
  zset-member "nan" NaN
  zset-member "pinf" +Inf
  zset-member "ninf" -Inf
  zset-member "e" -2e+10
db=0 key="zset2" type=zset enc=zset2
  zset-member "m" 2.25
  zset-member "i" -Inf
db=0 key="hash" type=hash enc=hash
  hash-field "f1"="v1"
  hash-field "f2"="300"
`)
}

func TestPackedEncodings(t *testing.T) {
	w := newRDB(11)
	w.key(rdbListQuicklist2, "ql2").len(2).
		len(2).str(string(listpack("a", 1, -1, 5000, -70000, 1<<40, strings.Repeat("s", 100)))).
		len(1).str("plain-node")
	w.key(rdbSetListpack, "slp").str(string(listpack("m1", 42)))
	w.key(rdbSetIntset, "is16").str(string(intset(2, -3, 4)))
	w.key(rdbSetIntset, "is64").str(string(intset(8, -1<<40, 1<<50)))
	w.key(rdbZSetListpack, "zlp").str(string(listpack("a", 1, "b", "2.5", "c", "-inf")))
	w.key(rdbHashListpack, "hlp").str(string(listpack("f", "v", "n", 12)))
	check(t, w.end(), `
db=0 key="ql2" type=list enc=quicklist2
  list-item "a"
  list-item "1"
  list-item "-1"
  list-item "5000"
  list-item "-70000"
  list-item "1099511627776"
  list-item "`+strings.Repeat("s", 100)+`"
  list-item "plain-node"
db=0 key="slp" type=set enc=set-listpack
  set-member "m1"
  set-member "42"
db=0 key="is16" type=set enc=intset
  set-member "-3"
  set-member "4"
db=0 key="is64" type=set enc=intset
  set-member "-1099511627776"
  set-member "1125899906842624"
db=0 key="zlp" type=zset enc=zset-listpack
  zset-member "a" 1
  zset-member "b" 2.5
  zset-member "c" -Inf
db=0 key="hlp" type=hash enc=hash-listpack
  hash-field "f"="v"
  hash-field "n"="12"
`)
}

func TestOldEncodings(t *testing.T) {
	// Redis 2.x: zipmap hashes, ziplist lists/zsets/hashes, RDB without CRC.
	w := newRDB(4)
	w.key(rdbHashZipmap, "zm").str(string(zipmap("f", "v", strings.Repeat("F", 300), "x")))
	w.key(rdbListZiplist, "zl").str(string(ziplist("a", 0, 12, 13, -100, 1000, 100000, 1<<30, 1<<40, strings.Repeat("z", 300))))
	w.key(rdbZSetZiplist, "zz").str(string(ziplist("m", 3, "n", "1.25")))
	w.key(rdbHashZiplist, "hz").str(string(ziplist("f", "v", "g", 7)))
	w.key(rdbListQuicklist, "ql").len(2).str(string(ziplist("a"))).str(string(ziplist("b", "c")))
	check(t, w.endNoCRC(false), `
db=0 key="zm" type=hash enc=zipmap
  hash-field "f"="v"
  hash-field "`+strings.Repeat("F", 300)+`"="x"
db=0 key="zl" type=list enc=ziplist
  list-item "a"
  list-item "0"
  list-item "12"
  list-item "13"
  list-item "-100"
  list-item "1000"
  list-item "100000"
  list-item "1073741824"
  list-item "1099511627776"
  list-item "`+strings.Repeat("z", 300)+`"
db=0 key="zz" type=zset enc=zset-ziplist
  zset-member "m" 3
  zset-member "n" 1.25
db=0 key="hz" type=hash enc=hash-ziplist
  hash-field "f"="v"
  hash-field "g"="7"
db=0 key="ql" type=list enc=quicklist
  list-item "a"
  list-item "b"
  list-item "c"
`)
}

func TestChecksum(t *testing.T) {
	data := newRDB(9).key(rdbString, "k").str("v").end()
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	_, err := dump(bad, nil)
	var ce *CorruptionError
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &ce) || ce.Offset != int64(len(bad)) {
		t.Fatalf("err = %v", err)
	}
	if _, err := dump(bad, &Options{SkipChecksum: true}); err != nil {
		t.Fatalf("SkipChecksum: %v", err)
	}
	zero := newRDB(9).key(rdbString, "k").str("v").endNoCRC(true)
	if _, err := dump(zero, nil); err != nil {
		t.Fatalf("stored zero checksum: %v", err)
	}
	// A corrupt value byte changes the CRC of a file whose value is skipped.
	flip := bytes.Clone(data)
	flip[len(flip)-10] ^= 0x20 // the 'v'
	p := NewParser(bytes.NewReader(flip), nil)
	for p.Next() {
	}
	if !errors.Is(p.Err(), ErrChecksum) {
		t.Fatalf("skipped value: err = %v", p.Err())
	}
}

func TestFilterSkips(t *testing.T) {
	w := newRDB(11)
	w.key(rdbString, "a:1").str("x")
	w.key(rdbList, "b:1").len(2).str("p").lzfStr([]byte{2, 'a', 'b', 'c', 4 << 5, 2}, 9)
	w.selectDB(2).key(rdbSetListpack, "a:2").str(string(listpack("m")))
	w.key(rdbZSet, "b:2").len(1).str("z").byte1(254)
	data := w.end()
	pat, err := KeyPattern("a:*")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		f    Filter
		want string
	}{
		"prefix":  {KeyPrefix("b:"), "b:1 b:2"},
		"pattern": {pat, "a:1 a:2"},
		"db":      {DBs(2), "a:2 b:2"},
		"type":    {Types(List, ZSet), "b:1 b:2"},
		"none":    {func(*Entry) bool { return false }, ""},
		"all":     {All(DBs(0), KeyPrefix("a")), "a:1"},
	} {
		p := NewParser(bytes.NewReader(data), &Options{Filter: tc.f})
		var keys []string
		for p.Next() {
			keys = append(keys, string(p.Entry().Key))
		}
		if p.Err() != nil || strings.Join(keys, " ") != tc.want {
			t.Errorf("%s: keys %q err %v, want %q", name, keys, p.Err(), tc.want)
		}
	}
}

func TestGlob(t *testing.T) {
	f := func(pattern, s string, want bool) {
		t.Helper()
		if err := checkPattern(pattern); err != nil {
			t.Fatalf("%q: %v", pattern, err)
		}
		if got := globMatch([]byte(pattern), []byte(s)); got != want {
			t.Errorf("globMatch(%q, %q) = %v", pattern, s, got)
		}
	}
	f("*", "", true)
	f("a*", "abc", true)
	f("a*c", "abxc", true)
	f("a*c", "abxd", false)
	f("h?llo", "hallo", true)
	f("h[ae]llo", "hello", true)
	f("h[^e]llo", "hello", false)
	f("h[a-b]llo", "hbllo", true)
	f(`a\*`, "a*", true)
	f(`a\*`, "ab", false)
	f("*a*b*c*", "xxaxxbxxcxx", true)
	if _, err := KeyPattern("a[b"); err == nil {
		t.Error("unclosed class accepted")
	}
}

func TestAccessorMisuse(t *testing.T) {
	data := newRDB(9).key(rdbString, "s").str("v").key(rdbList, "l").len(1).str("x").end()
	p := NewBytesParser(data, nil)
	if !p.Next() {
		t.Fatal(p.Err())
	}
	if err := p.Visit(func(*Element) error { return nil }); !errors.Is(err, ErrWrongAccessor) {
		t.Fatalf("Visit on string: %v", err)
	}
	v1, _ := p.Value()
	v2, err := p.Value()
	if err != nil || string(v1) != "v" || string(v2) != "v" {
		t.Fatalf("Value twice: %q %q %v", v1, v2, err)
	}
	if !p.Next() {
		t.Fatal(p.Err())
	}
	if _, err := p.Value(); !errors.Is(err, ErrWrongAccessor) {
		t.Fatalf("Value on list: %v", err)
	}
	n := 0
	if err := p.Visit(func(*Element) error { n++; return SkipRest }); err != nil || n != 1 {
		t.Fatalf("SkipRest: %v %d", err, n)
	}
	if err := p.Visit(func(*Element) error { return nil }); !errors.Is(err, ErrValueConsumed) {
		t.Fatalf("second Visit: %v", err)
	}
	if p.Next() || p.Err() != nil {
		t.Fatalf("end: %v", p.Err())
	}
	boom := errors.New("boom")
	p = NewBytesParser(data, nil)
	p.Next()
	p.Next()
	if err := p.Visit(func(*Element) error { return boom }); err != boom || p.Err() != boom || p.Next() {
		t.Fatalf("callback error: %v / %v", err, p.Err())
	}
}

func TestCloneDoesNotAlias(t *testing.T) {
	w := newRDB(11).key(rdbHashListpack, "h").str(string(listpack("f1", "v1", "f2", 2)))
	w.key(rdbString, "next").str("x")
	data := w.end()
	p := NewParser(bytes.NewReader(data), &Options{BufferSize: 64})
	var kept []Element
	var keys []Entry
	for p.Next() {
		keys = append(keys, p.Entry().Clone())
		if p.Entry().Type == Hash {
			p.Visit(func(el *Element) error { kept = append(kept, el.Clone()); return nil })
		}
	}
	if p.Err() != nil || len(kept) != 2 || string(kept[0].Member) != "f1" || string(kept[0].Value) != "v1" ||
		string(kept[1].Member) != "f2" || string(kept[1].Value) != "2" || string(keys[0].Key) != "h" || string(keys[1].Key) != "next" {
		t.Fatalf("err %v kept %+v keys %+v", p.Err(), kept, keys)
	}
}
