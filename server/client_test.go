package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/ingest"
)

// TestClientIngestFromURL: `sluice ingest --server` reads a CSV from an
// http URL, sends it in batches, and the rows come back from Client.Query.
func TestClientIngestFromURL(t *testing.T) {
	s := startServer(t, testConfig, "")
	var csv bytes.Buffer
	csv.WriteString("user,ts,n\n")
	for i := 0; i < 250; i++ {
		fmt.Fprintf(&csv, "u%d,2024-05-01T10:%02d:00Z,%d\n", i%5, i%60, i)
	}
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events.csv" {
			http.NotFound(w, r)
			return
		}
		w.Write(csv.Bytes())
	}))
	defer files.Close()
	ctx := context.Background()
	rc, err := OpenSource(ctx, files.URL+"/events.csv")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{URL: s.url}
	res, err := c.IngestStream(ctx, "events", rc, ingest.FormatOfPath(files.URL+"/events.csv"), ingest.Reject, 50)
	rc.Close()
	if err != nil || res.Accepted != 250 {
		t.Fatalf("IngestStream: %+v %v", res, err)
	}
	if got := s.tables["events"].pipe.Counters().Batches.Load(); got != 5 {
		t.Errorf("%d batches, want 5 of at most 50 rows", got)
	}
	var out strings.Builder
	if _, err := c.Query(ctx, "events", QueryRequest{Hash: []any{"u3"}, Columns: []string{"n"}, Format: "csv"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 51 {
		t.Fatalf("u3: %d lines, want header + 50:\n%s", got, out.String())
	}
	if _, err := c.Query(ctx, "events", QueryRequest{Columns: []string{"nope"}}, &out); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("unknown column through the client: %v", err)
	}
	// A value that does not fit, on line 7 of the file (row 5 of the
	// second batch of 5): the error names the file's line.
	bad := "user,ts,n\n" + strings.Repeat("u9,2024-05-01T10:00:00Z,1\n", 5) + "u9,2024-05-01T10:00:00Z,x\n"
	_, err = c.IngestStream(ctx, "events", strings.NewReader(bad), ingest.CSV, ingest.Reject, 3)
	if err == nil || !strings.Contains(err.Error(), "input line 7:") || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad value through the client: %v", err)
	}
	if _, err := OpenSource(ctx, files.URL+"/missing.csv"); err == nil {
		t.Error("missing URL opened")
	}
}
