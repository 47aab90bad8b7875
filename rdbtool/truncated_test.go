package rdbtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/rdb"
)

// keyRecord is where one key's record starts in a file and where its key
// bytes end (the value follows).
type keyRecord struct {
	key           []byte
	start, keyEnd int64
}

// keyRecords lists the records of an RDB file whose keys are stored plainly
// (not LZF-compressed), in file order.
func keyRecords(t *testing.T, path string, data []byte) []keyRecord {
	t.Helper()
	p, err := rdb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var recs []keyRecord
	for p.Next() {
		e := p.Entry()
		// The key is right after the opcodes and its length prefix: within
		// the first 20 bytes of the record.
		window := data[e.Offset:min(int(e.Offset)+20+len(e.Key), len(data))]
		i := bytes.Index(window, e.Key)
		if i < 0 {
			continue
		}
		recs = append(recs, keyRecord{key: bytes.Clone(e.Key), start: e.Offset, keyEnd: e.Offset + int64(i+len(e.Key))})
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestExportTruncatedAtEveryOffset cuts a fixture at every byte offset and
// exports the cut file as JSON and JSON Lines, in parallel and serial mode:
// the export fails with an error naming the file, an offset within the cut
// and, when the cut falls inside a value, its key; what was written is a
// prefix of the whole file's export (nothing made up, no record cut short
// where it could be dropped) and, for JSON, never a valid document, so no
// consumer takes a cut export for a whole one (the parallel
// mode once wrote the closing "]" and gave valid arrays missing keys).
func TestExportTruncatedAtEveryOffset(t *testing.T) {
	src := filepath.Join(fixtureDir, "redis-7.0.15-nochecksum.rdb")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	recs := keyRecords(t, src, data)
	if len(recs) < 10 {
		t.Fatalf("only %d plain keys found in %s", len(recs), src)
	}
	whole := map[Format][]byte{}
	for _, format := range []Format{JSON, JSONLines} {
		var buf bytes.Buffer
		if _, err := Export(context.Background(), src, &buf, format, Options{NoParallel: true}); err != nil {
			t.Fatal(err)
		}
		whole[format] = buf.Bytes()
	}
	cut := filepath.Join(t.TempDir(), "cut.rdb")
	validJSON := 0
	for n := 0; n < len(data); n++ {
		if err := os.WriteFile(cut, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		// The key whose value the cut falls in, if any.
		var inValue []byte
		for _, r := range recs {
			if r.keyEnd <= int64(n) {
				inValue = r.key
			}
		}
		for _, format := range []Format{JSON, JSONLines} {
			for _, serial := range []bool{false, true} {
				var out bytes.Buffer
				_, err := Export(context.Background(), cut, &out, format, Options{NoParallel: serial})
				where := "cut at " + strconv.Itoa(n) + " format " + strconv.Itoa(int(format)) + " serial " + strconv.FormatBool(serial)
				if err == nil {
					t.Fatalf("%s: no error", where)
				}
				var ce *rdb.CorruptionError
				if !errors.As(err, &ce) || ce.Offset > int64(n) {
					t.Fatalf("%s: want a CorruptionError at an offset within the cut, got %v", where, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, cut) || !strings.Contains(msg, "offset "+strconv.FormatInt(ce.Offset, 10)) {
					t.Errorf("%s: error does not name the file and offset: %v", where, err)
				}
				if ce.Key != nil && !bytes.Equal(ce.Key, inValue) && inValue != nil {
					// A key named must be the last one read.
					t.Errorf("%s: error names key %q, the cut is after key %q", where, ce.Key, inValue)
				}
				if inValue != nil && ce.Key == nil && cutInsideValue(recs, n) {
					t.Errorf("%s: the cut is inside the value of %q, the error does not name it: %v", where, inValue, err)
				}
				if !bytes.HasPrefix(whole[format], out.Bytes()) {
					t.Errorf("%s: output is not a prefix of the whole export:\n%s", where, out.Bytes())
				}
				if format == JSON && json.Valid(out.Bytes()) {
					validJSON++
					t.Errorf("%s: output is valid JSON (%d bytes): a cut export looks whole", where, out.Len())
				}
				if format == JSONLines && out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
					t.Errorf("%s: JSON Lines output ends mid-line on a small value", where)
				}
			}
		}
		if t.Failed() && validJSON > 20 {
			t.Fatal("too many failures")
		}
	}
}

// cutInsideValue reports whether a cut at n falls after a key's bytes and
// before the next record starts (the cut is in that key's value, or in the
// opcodes before the next record; only the first is sure to name the key,
// so the next record must be in the same database run: no SELECTDB between).
func cutInsideValue(recs []keyRecord, n int) bool {
	for i, r := range recs {
		if r.keyEnd <= int64(n) && (i+1 == len(recs) || int64(n) <= recs[i+1].start) {
			return i+1 < len(recs) && recs[i+1].start-r.keyEnd > 0 && int64(n) < recs[i+1].start
		}
	}
	return false
}
