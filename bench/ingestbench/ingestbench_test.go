package ingestbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// TestRunSmall runs the loop end to end on a tiny scale: rows go in through
// a real server and the queries (one partition, all 64) return exactly
// what was stored.
func TestRunSmall(t *testing.T) {
	res, err := Run(context.Background(), Options{Duration: 200 * time.Millisecond, Clients: 2, BatchRows: 100, Cases: []string{"none", "lua", "query", "range"}, QueryRows: 3000, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("results: %+v", res)
	}
	for _, r := range res[:2] {
		if r.Rows == 0 || r.Rows%100 != 0 || r.P50 == 0 || r.P99 < r.P50 || r.CPUSeconds <= 0 {
			t.Errorf("%s: %+v", r.Case, r)
		}
	}
	for _, r := range res[2:] {
		if r.Rows != 3000 {
			t.Errorf("%s: %+v", r.Case, r)
		}
	}
	if out := Format(res); !strings.Contains(out, "rows/s") {
		t.Errorf("Format: %s", out)
	}
}
