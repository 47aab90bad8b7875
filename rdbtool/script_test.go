package rdbtool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/luavm"
)

const testScript = `
function key(e)
  if e.type == "string" and e.db == 0 then
    -- a row of our own: reads the value
    return {key = e.key, len = #e.value, db = e.db, expires = e.expire_at_ms ~= nil}
  end
  if e.type == "list" then
    -- keep long lists: reads the value, then keeps the key's own record
    return #e.value > 3
  end
  if e.type == "hash" then
    return true -- keep without reading the value
  end
  if e.type == "set" then
    return true, {set = e.key, members = #e.value} -- the record and a row
  end
  return false
end
`

func TestExportScript(t *testing.T) {
	path := filepath.Join(fixtureDir, "redis-7.0.15.rdb")
	script := filepath.Join(t.TempDir(), "keep.lua")
	if err := os.WriteFile(script, []byte(testScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := ExportScript(context.Background(), path, &out, JSONLines, script, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rows, setRows, records []map[string]any
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line not JSON: %v: %s", err, sc.Bytes())
		}
		if _, ok := m["len"]; ok {
			rows = append(rows, m)
		} else if _, ok := m["set"]; ok {
			setRows = append(setRows, m)
		} else {
			records = append(records, m)
		}
	}
	if int64(len(rows)+len(setRows)+len(records)) != st.Keys {
		t.Errorf("stats say %d keys, %d lines", st.Keys, len(rows)+len(setRows)+len(records))
	}
	// What the server said, filtered by the rule the script implements.
	var wantRecords []map[string]any
	wantLen := map[string]float64{}
	wantByKey := map[string]int{}
	for _, k := range loadFixture(t, path) {
		switch k["type"] {
		case "string":
			if k["db"].(float64) == 0 {
				wantLen[decodeBytes(t, k["key"])] = float64(len(decodeBytes(t, k["value"])))
			}
		case "list":
			if len(k["value"].([]any)) > 3 {
				wantRecords = append(wantRecords, k)
			}
		case "hash":
			wantRecords = append(wantRecords, k)
		case "set":
			wantRecords = append(wantRecords, k)
			wantByKey[fmt.Sprintf("%q %v", decodeBytes(t, k["key"]), float64(len(k["value"].([]any))))]++
		}
	}
	compareRecords(t, "script records", wantRecords, records)
	if len(setRows) == 0 {
		t.Error("no set rows")
	}
	// Set rows carry no db: compare (key, member count) with multiplicity.
	gotMembers := map[string]int{}
	for _, r := range setRows {
		gotMembers[fmt.Sprintf("%q %v", decodeBytes(t, r["set"]), r["members"])]++
	}
	if !reflect.DeepEqual(gotMembers, wantByKey) {
		t.Errorf("set rows %v, want %v", gotMembers, wantByKey)
	}
	if len(rows) != len(wantLen) {
		t.Errorf("%d rows, want %d (one per db-0 string)", len(rows), len(wantLen))
	}
	for _, r := range rows {
		k := decodeBytes(t, r["key"])
		if want, ok := wantLen[k]; !ok || r["len"] != want {
			t.Errorf("row for %q: len %v, the server's value has %v bytes", k, r["len"], want)
		}
	}
}

func TestExportScriptErrorNamesKeyAndLine(t *testing.T) {
	path := filepath.Join(fixtureDir, "redis-7.0.15.rdb")
	script := filepath.Join(t.TempDir(), "bad.lua")
	src := "function key(e)\n  if e.type == \"zset\" then\n    error(\"no zsets please\")\n  end\n  return true\nend\n"
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ExportScript(context.Background(), path, &bytes.Buffer{}, JSONLines, script, Options{})
	var ce *luavm.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *luavm.CallError, got %v", err)
	}
	if ce.Line != 3 || !strings.Contains(err.Error(), "offset") || !strings.Contains(err.Error(), "zset") {
		t.Errorf("error does not name line 3, the key and its offset: %v", err)
	}

	if err := os.WriteFile(script, []byte("function key(e) return end end"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ExportScript(context.Background(), path, &bytes.Buffer{}, JSONLines, script, Options{})
	var cerr *luavm.CompileError
	if !errors.As(err, &cerr) {
		t.Errorf("want a *luavm.CompileError, got %v", err)
	}
}

// TestExportScriptLoopingTopLevel: a script whose top level never ends fails
// within the load timeout, and a cancelled context stops it at once
// (`sluice rdb --script` once hung forever).
func TestExportScriptLoopingTopLevel(t *testing.T) {
	path := filepath.Join(fixtureDir, "redis-7.0.15.rdb")
	script := filepath.Join(t.TempDir(), "loop.lua")
	if err := os.WriteFile(script, []byte("while true do end\nfunction key(e) return true end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := ExportScript(context.Background(), path, &bytes.Buffer{}, JSONLines, script, Options{})
	if !errors.Is(err, luavm.ErrTimeout) || !strings.Contains(err.Error(), "loop.lua") {
		t.Fatalf("want a load timeout naming loop.lua, got %v", err)
	}
	// Not a speed measurement: the load limit is scriptLoadTimeout, not the
	// minute a batch of keys may take.
	if d := time.Since(start); d > scriptBatchTimeout/2 {
		t.Errorf("the looping top level ran %v, past the load timeout %v", d, scriptLoadTimeout)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = ExportScript(ctx, path, &bytes.Buffer{}, JSONLines, script, Options{})
	if err == nil {
		t.Fatal("a cancelled load returned no error")
	}
}
