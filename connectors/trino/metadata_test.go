package trino_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
)

// TestTrinoMetadataOncePerStatement counts, through a proxy in front of
// the catalog's node, the connector's requests for a table's description
// while a real Trino plans and runs statements: Trino asks the connector
// for a table's handle, columns and metadata many times per statement,
// and the connector asks the node once.
func TestTrinoMetadataOncePerStatement(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes := startNodes(t, 1)
	fill(t, nodes[0], 0, 100)

	target, err := url.Parse(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var described, listed atomic.Int64
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case "/v1/tables/events":
				described.Add(1)
			case "/v1/tables":
				listed.Add(1)
			}
		}
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: counting, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	trino := sharedTrino(t)
	cat := newCatalog(t, trino, "sluice", catalogFile(t, "http://"+ln.Addr().String()))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A statement that asks nothing of the catalog first: the first
	// statement of a newly started Trino once cost 2 lookups in CI where
	// every later one cost 1 (its cause not found yet); the test counts
	// what a warm Trino asks per statement.
	if _, _, err := trino.Query(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"SELECT count(*) FROM sluice.cluster.events",
		"SELECT sum(n) FROM sluice.cluster.events WHERE \"user\" = 'u7' AND ts >= from_iso8601_timestamp('2024-01-01T00:00:00Z')",
		"SELECT count(*) FROM sluice.cluster.events a JOIN sluice.cluster.events b ON a.n = b.n",
		"SELECT count(*) FROM sluice.information_schema.columns WHERE table_schema = 'cluster'",
		"SELECT column_name FROM sluice.information_schema.columns WHERE table_schema = 'cluster' AND table_name = 'events'",
		"SHOW TABLES FROM sluice.cluster",
	} {
		sql = strings.ReplaceAll(sql, "sluice.", cat+".") // this test's own catalog of the package's Trino
		d0, l0 := described.Load(), listed.Load()
		if _, _, err := trino.Query(ctx, sql); err != nil {
			log, _ := os.ReadFile(trino.Log)
			t.Fatalf("%s: %v\nTrino log (end): %s", sql, err, log[max(0, len(log)-3000):])
		}
		d, l := described.Load()-d0, listed.Load()-l0
		t.Logf("%s: %d GET /v1/tables/events, %d GET /v1/tables", sql, d, l)
		if d > 1 || l > 1 {
			t.Errorf("%s: %d requests for the table's description and %d for the list of tables, want at most 1 each", sql, d, l)
		}
	}
}
