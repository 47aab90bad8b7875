package coldtier_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// TestRESTCatalog compacts through an Iceberg REST catalog (Apache
// Iceberg's own REST catalog server, a Java process) into a local
// warehouse, in two runs, and reads the rows back over both tiers; a
// restart (a new Compactor) sees the committed watermark.
func TestRESTCatalog(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "rest",
		Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI},
	}
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 1200, 4)
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	want := tieredRows(t, c, table.Query{})
	for _, wm := range []time.Time{day0.Add(48 * time.Hour), day0.Add(96 * time.Hour)} {
		if _, err := c.Compact(ctx, wm, coldtier.Options{Remove: true}); err != nil {
			log, _ := os.ReadFile(rest.Log)
			t.Fatalf("%v\nREST catalog log (last 3000 bytes): %s", err, log[max(0, len(log)-3000):])
		}
	}
	c.Close()
	c, err = coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if left := normRows(t, tb, table.Query{}); len(left) != 0 {
		t.Fatalf("%d rows left in the store", len(left))
	}
	if got := tieredRows(t, c, table.Query{}); !reflect.DeepEqual(got, want) {
		t.Errorf("%d rows through the REST catalog, want %d", len(got), len(want))
	}
	files, err := c.DataFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("%d data files, want one per day (4)", len(files))
	}
}

// TestMaintainRetryKeepsSnapshotLogSorted: node A stages a rewrite's
// replace snapshot, node B commits a run before A's commit, and the REST
// catalog refuses A's commit (409). The retried rewrite must not keep the
// timestamp it was staged with: the snapshot log would then go back in
// time, which Apache Iceberg's REST server refuses once the gap exceeds a
// minute ("[BUG] Expected sorted snapshot log entries", seen in the
// compressed hour). Every row is still read once.
func TestMaintainRetryKeepsSnapshotLogSorted(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	ctx := context.Background()
	var nodes [2]*coldtier.Compactor
	var stores [2]*table.Table
	for i := range nodes {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		st, tb := openTable(t, nodeDir, staticSchema)
		defer st.Close()
		cfg := coldtier.Config{
			Warehouse: filepath.Join(dir, "warehouse"), StateDir: nodeDir, Node: fmt.Sprintf("node%d", i),
			Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI},
		}
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes[i], stores[i] = c, tb
	}
	a, b := nodes[0], nodes[1]
	smallCommits(t, stores[0], a, 0, 4, 50, 1)

	staged := 0
	defer coldtier.SetRewriteStaged(func() {
		staged++
		if staged == 1 {
			time.Sleep(5 * time.Millisecond) // B's snapshot is younger than A's staged one
			smallCommits(t, stores[1], b, 100000, 1, 50, 1)
		}
	})()
	ms, err := a.Maintain(ctx, coldtier.MaintainOptions{SnapshotAge: time.Hour})
	if err != nil {
		log, _ := os.ReadFile(rest.Log)
		t.Fatalf("%v\nREST catalog log (last 3000 bytes): %s", err, log[max(0, len(log)-3000):])
	}
	t.Logf("maintain: %+v (staged %d times)", ms, staged)
	if ms.FilesRewritten != 4 {
		t.Errorf("rewrote %d files, want the 4 of node A's runs", ms.FilesRewritten)
	}

	entries, snaps, err := coldtier.SnapshotLog(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(entries); i++ {
		prev, cur := entries[i-1], entries[i]
		if cur.TimestampMs < prev.TimestampMs {
			t.Errorf("snapshot log entry %d (snapshot %d, %s) is older than entry %d (snapshot %d, %s): %d ms back",
				i, cur.SnapshotID, snaps[cur.SnapshotID].Summary.Operation, i-1, prev.SnapshotID,
				snaps[prev.SnapshotID].Summary.Operation, prev.TimestampMs-cur.TimestampMs)
		}
	}
	rewrite, runB := -1, -1
	for i, e := range entries {
		props := snaps[e.SnapshotID].Summary.Properties
		if props["sluice.rewrite"] != "" {
			rewrite = i
		}
		if props["sluice.run"] != "" && props["sluice.node"] == "node1" {
			runB = i
		}
	}
	if runB < 0 || rewrite < runB {
		t.Errorf("the rewrite is entry %d of the snapshot log, node B's run entry %d: want the rewrite after B's run", rewrite, runB)
	}

	seen := map[float64]int{}
	for _, r := range tieredRows(t, a, table.Query{}) {
		seen[r["n"].(float64)]++
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("row n=%v read %d times", n, k)
		}
	}
	if len(seen) != 4*50+50 {
		t.Errorf("%d distinct rows, want %d", len(seen), 4*50+50)
	}
}

// TestRESTCatalogAuth: a REST catalog behind an authenticating front
// (coldtest.AuthProxy: a bearer token, or OAuth2 client credentials
// exchanged at /v1/oauth/tokens). The right token or credential commits and
// reads; a wrong or missing one fails at Open with an error that names the
// catalog and says unauthorized, and holds no secret.
func TestRESTCatalogAuth(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	const token, clientID, clientSecret = "tok-8f2a61c0", "sluice", "cred-5d93e7b4"
	proxy, err := coldtest.StartAuthProxy(rest.URI, token, clientID, clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	secret := func(v string) func() (string, error) { return func() (string, error) { return v, nil } }
	ctx := context.Background()
	open := func(t *testing.T, tb *table.Table, node string, cat coldtier.Catalog) (*coldtier.Compactor, error) {
		cat.Type, cat.URI = "rest", proxy.URL
		return coldtier.Open(ctx, coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: filepath.Join(dir, node), Node: node, Catalog: cat}, tb)
	}
	for i, c := range []struct {
		name string
		cat  coldtier.Catalog
	}{
		{"token", coldtier.Catalog{Token: secret(token)}},
		{"credential", coldtier.Catalog{Credential: secret(clientID + ":" + clientSecret)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, tb := openTable(t, filepath.Join(dir, c.name), staticSchema)
			defer st.Close()
			fill(t, tb, i*10000, 300, 2)
			issued := proxy.Issued.Load()
			comp, err := open(t, tb, c.name, c.cat)
			if err != nil {
				t.Fatal(err)
			}
			defer comp.Close()
			want := tieredRows(t, comp, table.Query{})
			st2, err := comp.Compact(ctx, day0.Add(96*time.Hour), coldtier.Options{Remove: true})
			if err != nil {
				t.Fatal(err)
			}
			if st2.Rows != 300 {
				t.Errorf("committed %d rows, want 300", st2.Rows)
			}
			if got := tieredRows(t, comp, table.Query{}); !reflect.DeepEqual(got, want) {
				t.Errorf("%d rows read back through the authenticated catalog, want %d", len(got), len(want))
			}
			if c.name == "credential" && proxy.Issued.Load() == issued {
				t.Errorf("no token issued for the credential: the catalog was not asked through the token endpoint")
			}
		})
	}
	for _, c := range []struct {
		name, secret string
		cat          coldtier.Catalog
	}{
		{"wrong token", "tok-wrong-77c1", coldtier.Catalog{Token: secret("tok-wrong-77c1")}},
		{"wrong credential", "cred-wrong-3b08", coldtier.Catalog{Credential: secret(clientID + ":cred-wrong-3b08")}},
		{"no secret", "", coldtier.Catalog{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, tb := openTable(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")), staticSchema)
			defer st.Close()
			refused := proxy.Refused.Load()
			comp, err := open(t, tb, strings.ReplaceAll(c.name, " ", "-"), c.cat)
			if err == nil {
				comp.Close()
				t.Fatal("opened")
			}
			msg := err.Error()
			if !errors.Is(err, catalog.ErrUnauthorized) || !strings.Contains(msg, proxy.URL) || !strings.Contains(msg, "unauthorized") {
				t.Errorf("%v\nwant an error naming the catalog %s and saying unauthorized", err, proxy.URL)
			}
			if c.secret != "" && strings.Contains(msg, c.secret) || strings.Contains(msg, token) || strings.Contains(msg, clientSecret) {
				t.Errorf("the error holds a secret: %v", err)
			}
			if proxy.Refused.Load() == refused {
				t.Errorf("the proxy refused nothing: %v", err)
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}
