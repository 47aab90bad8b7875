package ingest

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDebeziumJSON: each op of a Debezium JSON event, wrapped or not, gives
// the row's object, its operation and its position; a delete without
// before takes the message key; what cannot be applied is refused with
// its sentinel.
func TestDebeziumJSON(t *testing.T) {
	f := func(body, key, column, wantRow string, wantDelete bool, wantPos ChangePosition, wantErr error) {
		t.Helper()
		row, c, err := DebeziumJSON([]byte(body), []byte(key), column)
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				t.Errorf("%s: error %v, want %v", body, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", body, err)
			return
		}
		if string(row) != wantRow || c.Delete != wantDelete || c.Position != wantPos {
			t.Errorf("%s: %s %+v, want %s delete=%v %+v", body, row, c, wantRow, wantDelete, wantPos)
		}
	}
	f(`{"before":null,"after":{"id":1},"op":"c","source":{"ts_ms":5,"lsn":9},"ts_ms":7}`, "", "", `{"id":1}`, false, ChangePosition{TimeMillis: 5, LSN: 9, HasTime: true, HasLSN: true}, nil)
	f(`{"schema":{"type":"struct"},"payload":{"after":{"id":2},"op":"r","ts_ms":7}}`, "", "", `{"id":2}`, false, ChangePosition{TimeMillis: 7, HasTime: true}, nil)
	f(`{"before":{"id":3,"n":1},"after":{"id":3,"n":2},"op":"u"}`, "", "", `{"id":3,"n":2}`, false, ChangePosition{}, nil)
	f(`{"before":{"id":4},"after":null,"op":"d"}`, "", "", `{"id":4}`, true, ChangePosition{}, nil)
	f(`{"before":null,"op":"d"}`, `{"schema":{},"payload":{"id":5}}`, "", `{"id":5}`, true, ChangePosition{}, nil)
	f(`{"before":{},"op":"d"}`, `6`, "id", `{"id":6}`, true, ChangePosition{}, nil)
	f(`{"op":"d"}`, ``, "id", "", true, ChangePosition{}, ErrNoKey)
	f(`{"op":"t"}`, ``, "", "", false, ChangePosition{}, ErrTruncate)
	f(`{"op":"m","after":{"id":1}}`, ``, "", "", false, ChangePosition{}, ErrNotChange)
	f(`{"id":1}`, ``, "", "", false, ChangePosition{}, ErrNotChange)
	f(`{"op":"c","after":null}`, ``, "", "", false, ChangePosition{}, ErrNotChange)
	f(`not json`, ``, "", "", false, ChangePosition{}, ErrNotChange)
}

// TestKeyObject: a message key as the object of its key columns.
func TestKeyObject(t *testing.T) {
	f := func(key, column, want string, wantErr bool) {
		t.Helper()
		got, err := KeyObject([]byte(key), column)
		if (err != nil) != wantErr || string(got) != want {
			t.Errorf("KeyObject(%q, %q) = %s, %v; want %s (error %v)", key, column, got, err, want, wantErr)
		}
	}
	f(`{"a":1,"b":"x"}`, "", `{"a":1,"b":"x"}`, false)
	f(`{"schema":{"type":"int32"},"payload":7}`, "id", `{"id":7}`, false)
	f(`7`, "id", `{"id":7}`, false)
	f(`"x"`, "k", `{"k":"x"}`, false)
	f(`plain text`, "k", `{"k":"plain text"}`, false)
	f(`7`, "", ``, true)
	f(``, "id", ``, true)
	f(`null`, "id", ``, true)
	f(`{}`, "id", ``, true)
}

// TestDebeziumRowNested: an envelope decoded from Avro (nested records as
// JSON text, as the registry decoder gives them, or maps).
func TestDebeziumRowNested(t *testing.T) {
	noKey := func() (Row, error) { return nil, ErrNoKey }
	row, c, err := DebeziumRow(Row{"op": "u", "before": nil, "after": json.RawMessage(`{"id":1,"name":"a"}`), "source": json.RawMessage(`{"ts_ms":5,"lsn":null}`)}, noKey)
	if err != nil || row["id"] != int64(1) || row["name"] != "a" || c.Delete || c.Position != (ChangePosition{TimeMillis: 5, HasTime: true}) {
		t.Errorf("update: %v %+v %v", row, c, err)
	}
	row, c, err = DebeziumRow(Row{"op": "d", "before": map[string]any{"id": int64(2)}, "after": json.RawMessage(`null`)}, noKey)
	if err != nil || row["id"] != int64(2) || !c.Delete {
		t.Errorf("delete: %v %+v %v", row, c, err)
	}
	if _, _, err = DebeziumRow(Row{"op": "d", "before": json.RawMessage(`null`)}, noKey); !errors.Is(err, ErrNoKey) {
		t.Errorf("delete without before nor key: %v, want ErrNoKey", err)
	}
	if _, _, err = DebeziumRow(Row{"op": "c", "after": int64(3)}, noKey); !errors.Is(err, ErrNotChange) {
		t.Errorf("after not a record: %v, want ErrNotChange", err)
	}
}

// TestOperationField: the configured values delete; the column goes.
func TestOperationField(t *testing.T) {
	f := OperationField{Column: "op", Delete: []string{"D", "3"}}
	for _, tc := range []struct {
		v    any
		want bool
	}{{"D", true}, {"d", false}, {int64(3), true}, {float64(3), true}, {nil, false}, {"I", false}} {
		r := Row{"id": int64(1), "op": tc.v}
		if got := f.Take(r); got != tc.want {
			t.Errorf("op %v: delete %v, want %v", tc.v, got, tc.want)
		}
		if _, ok := r["op"]; ok {
			t.Errorf("op %v: the column is still in the row", tc.v)
		}
	}
	if f.Take(Row{"id": int64(1)}) {
		t.Error("a row without op deletes")
	}
}

// FuzzDebeziumJSON: no input makes the envelope scanner panic, and an
// event it takes hands over a row that is one JSON object.
func FuzzDebeziumJSON(f *testing.F) {
	for _, s := range []string{`{"op":"c","after":{"id":1}}`, `{"payload":{"op":"d","before":{"a":"}"}}}`, `{"op":"u","after":{"s":"\"{["}}`, `{"op`, `{"op":"c","after":{`, `[]`, `{}`, ` { "op" : "c" , "after" : { } } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		row, _, err := DebeziumJSON(body, []byte(`{"id":1}`), "id")
		if err == nil && !isObject(row) {
			t.Fatalf("%q: row %q is not an object", body, row)
		}
	})
}
