package server

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/rdbfixture"
)

// TestRDBAtomicTypeMismatchDeadLetters: a snapshot sent atomically to a
// table whose static schema makes key an int64: the keys that are
// integers are stored, every other key's row is a dead letter naming the
// column and the value, and the snapshot is not refused.
func TestRDBAtomicTypeMismatchDeadLetters(t *testing.T) {
	schema := "    schema:\n"
	for _, c := range ingest.RDBColumns {
		typ := c.Type
		if c.Name == "key" {
			typ = "int64"
		}
		schema += "      - {name: " + c.Name + ", type: " + typ + "}\n"
	}
	s := startServer(t, "listen: {http: \"127.0.0.1:0\"}\ntables:\n  - name: keys\n    on_bad_line: skip\n"+schema, "")
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	numeric := map[int64]bool{}
	for _, k := range fx.Keys {
		if n, err := strconv.ParseInt(k.Key, 10, 64); err == nil {
			numeric[n] = true
		}
	}
	if len(numeric) == 0 || len(numeric) == len(fx.Keys) {
		t.Fatalf("the fixture has %d integer keys of %d: the test needs some of each", len(numeric), len(fx.Keys))
	}
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?batch=5", bytes.NewReader(data))
	if code != 200 || res["accepted"] != float64(len(numeric)) {
		t.Fatalf("snapshot: %d %v; want %d integer keys accepted", code, res, len(numeric))
	}
	for _, r := range queryAll(t, s, "keys", "") {
		if k, ok := r["key"].(float64); !ok || !numeric[int64(k)] {
			t.Errorf("stored row %v: not an integer key", r)
		}
	}
	dead := queryAll(t, s, "keys_deadletter", "")
	if len(dead) != len(fx.Keys)-len(numeric) {
		t.Errorf("%d dead letters, want %d", len(dead), len(fx.Keys)-len(numeric))
	}
	for _, d := range dead {
		if d["column"] != "key" || !strings.Contains(fmt.Sprint(d["error"]), "does not fit") {
			t.Errorf("dead letter %v: want column key and the mismatch", d)
		}
	}
}
