package compute

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/luavm"
)

// TestMaxResultBytes: a gopher-lua column returning a string over its
// max_result_bytes fails the row with ErrResultSize, naming the column and
// the limit; a smaller one is kept.
func TestMaxResultBytes(t *testing.T) {
	p := newProcessor(t, `computed:
  - name: big
    type: string
    nullable: true
    max_result_bytes: 1000
    func: "function main(row) return string.rep('x', row.n) end"
`, Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{"n": 2000}`, `{"n": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) != 1 || !errors.Is(b.Errors[0], luavm.ErrResultSize) || !strings.Contains(b.Errors[0].Error(), `"big"`) || !strings.Contains(b.Errors[0].Error(), "max_result_bytes") {
		t.Fatalf("errors: %v", b.Errors)
	}
	if len(b.Rows) != 2 || b.Rows[0]["big"] != nil || b.Rows[1]["big"] != "xxxxxxxxxx" {
		t.Fatalf("rows: %v", b.Rows)
	}
}
