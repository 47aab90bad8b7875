package table

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestTrustJSON checks that TrustJSON skips the JSON check only for the
// json.RawMessage values of the columns it names, under its context: every
// other JSON value is still checked, and a trusted value is stored byte for
// byte.
func TestTrustJSON(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	for _, static := range []bool{false, true} {
		name := map[bool]string{false: "inferred", true: "static"}[static]
		t.Run(name, func(t *testing.T) {
			cfg := Config{Name: name, SortBy: "ts"}
			if static {
				cfg.Columns = []Column{{"ts", Timestamp}, {"value", JSON}, {"other", JSON}}
			}
			tb, err := s.Table(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// A first, valid row gives an inferred table its json columns.
			if err := tb.Append(ctx, []Row{{"ts": t0, "value": json.RawMessage(`1`), "other": json.RawMessage(`2`)}}); err != nil {
				t.Fatal(err)
			}
			trusted := TrustJSON(ctx, "value")
			bad := json.RawMessage(`{"unterminated": [`)
			rejected := []struct {
				what string
				ctx  context.Context
				row  Row
			}{
				{"invalid raw JSON without TrustJSON", ctx, Row{"ts": t0, "value": bad}},
				{"invalid raw JSON in a column TrustJSON does not name", trusted, Row{"ts": t0, "value": json.RawMessage(`3`), "other": bad}},
			}
			if static {
				// (An inferred table would widen the column to string.)
				rejected = append(rejected, struct {
					what string
					ctx  context.Context
					row  Row
				}{"an invalid JSON string in a trusted column", trusted, Row{"ts": t0, "value": string(bad)}})
			}
			for _, c := range rejected {
				var se *SchemaError
				if err := tb.Append(c.ctx, []Row{c.row}); !errors.As(err, &se) {
					t.Errorf("%s: Append error %v, want a *SchemaError", c.what, err)
				}
			}
			// Trusted: stored as given, even the text json.Valid would refuse
			// (which shows that it was not checked).
			stored := []json.RawMessage{json.RawMessage(`{"a":["x\u00e9",1.5e3,null]}`), bad}
			for i, v := range stored {
				if err := tb.Append(trusted, []Row{{"ts": t0.Add(time.Duration(i+1) * time.Minute), "value": v}}); err != nil {
					t.Fatalf("trusted value %s: %v", v, err)
				}
			}
			rows := collect(t, tb, Query{From: t0.Add(time.Minute)})
			if len(rows) != len(stored) {
				t.Fatalf("%d rows, want %d: %v", len(rows), len(stored), rows)
			}
			for i, r := range rows {
				if got, ok := r["value"].(json.RawMessage); !ok || string(got) != string(stored[i]) {
					t.Errorf("row %d: value %#v, want %s", i, r["value"], stored[i])
				}
			}
		})
	}
}
