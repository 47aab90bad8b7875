package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/table"
)

// TestOpenTableTypes: a table's column types go through the one parser
// (coltype.Parse). An int32 schema column is an int32 to compute and
// stored as int64; a computed int32 column missing from a static schema is
// stored as int64 too; a bad type is an error naming the column (config
// validation catches it first; openTable must not drop it either).
func TestOpenTableTypes(t *testing.T) {
	store, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &Server{cfg: &config.Config{}, log: slog.New(slog.DiscardHandler), store: store}

	tc := config.Table{Name: "t", SortBy: "ts", Schema: []config.Column{{Name: "ts", Type: "time"}, {Name: "n", Type: "INTEGER"}}}
	tc.Computed = []config.ComputedColumn{{Script: config.ComputeScript{Name: "m", Func: "make://identifier"}, Type: "uint32"}}
	ts, err := s.openTable(context.Background(), tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.proc.Close()
	if got := ts.schema["n"]; got != compute.Int32 {
		t.Errorf("compute schema of n = %v, want int32", got)
	}
	want := map[string]table.Type{"ts": table.Timestamp, "n": table.Int64, "m": table.Int64}
	for _, c := range ts.table.Schema() {
		if c.Type != want[c.Name] {
			t.Errorf("stored column %q is %v, want %v", c.Name, c.Type, want[c.Name])
		}
		delete(want, c.Name)
	}
	if len(want) > 0 {
		t.Errorf("columns missing from the stored schema: %v", want)
	}

	bad := config.Table{Name: "u", SortBy: "ts", Schema: []config.Column{{Name: "ts", Type: "timestamp"}, {Name: "x", Type: "int"}}}
	_, err = s.openTable(context.Background(), bad)
	if !errors.Is(err, coltype.ErrUnknown) || !strings.Contains(err.Error(), `schema column "x"`) || !strings.Contains(err.Error(), `"int"`) {
		t.Errorf("bad schema type: %v; want coltype.ErrUnknown naming column x and the type", err)
	}
}
