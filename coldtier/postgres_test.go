package coldtier_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/pgtest"
	"github.com/sluicedb/sluice/table"
)

// The package's one PostgreSQL server, started by the first test that
// needs it and stopped by TestMain.
var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgErr  error
)

func postgres(t testing.TB) *pgtest.Server {
	t.Helper()
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pgSrv, pgErr = pgtest.Start(ctx)
	})
	if errors.Is(pgErr, pgtest.ErrMissing) {
		coldtest.Require(t, pgErr) // fails with CI set, skips otherwise
	} else if pgErr != nil {
		t.Fatal(pgErr)
	}
	return pgSrv
}

func stopPostgres() { pgSrv.Stop() }

// databases numbers the databases of the package's tests, so that -count
// runs them again on new ones.
var databases atomic.Int64

// pgConfig is testConfig with the catalog in a new PostgreSQL database.
func pgConfig(t testing.TB, dir, prefix, database string) coldtier.Config {
	t.Helper()
	cfg := testConfig(t, dir, prefix)
	srv := postgres(t)
	uri, err := srv.CreateDatabase(context.Background(), fmt.Sprintf("%s_%d", database, databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Catalog.URI = uri
	return cfg
}

// catalogRows reads the catalog's own table in PostgreSQL: the Iceberg
// tables it registers, with their metadata locations.
func catalogRows(t testing.TB, uri string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT table_namespace || '.' || table_name, metadata_location FROM iceberg_tables WHERE catalog_name = 'sluice'")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var name, loc string
		if err := rows.Scan(&name, &loc); err != nil {
			t.Fatal(err)
		}
		out[name] = loc
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPostgresCatalog compacts three of four days into an Iceberg table
// registered in a PostgreSQL catalog: the catalog's iceberg_tables row in
// PostgreSQL points at the table's current metadata; sluice's query over
// both tiers returns every row once, as before the compaction; pyiceberg
// (SQL catalog through psycopg2) loads the table from the same database and
// scans exactly the compacted rows, as does DuckDB over the files of
// pyiceberg's plan; a reopened compactor finds the table.
func TestPostgresCatalog(t *testing.T) {
	dir := t.TempDir()
	cfg := pgConfig(t, dir, "pg-catalog", "compact")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 4000, 4)
	ctx := context.Background()
	wantCold := normRows(t, tb, table.Query{To: day0.Add(72 * time.Hour)})
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantAll := tieredRows(t, c, table.Query{})
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 3000 {
		t.Fatalf("compacted %d rows, want 3000", stats.Rows)
	}
	if hot := normRows(t, tb, table.Query{}); len(hot) != 1000 {
		t.Fatalf("%d rows left in the store, want the 1000 of the last day", len(hot))
	}

	got := tieredRows(t, c, table.Query{})
	if !reflect.DeepEqual(got, wantAll) {
		t.Errorf("query over both tiers: %d rows, first %v; want %d, first %v", len(got), first(got), len(wantAll), first(wantAll))
	}
	seen := map[float64]int{}
	for _, r := range got {
		seen[r["n"].(float64)]++
	}
	if len(seen) != 4000 || len(got) != 4000 {
		t.Errorf("query over both tiers: %d rows, %d distinct, want 4000 once each", len(got), len(seen))
	}

	reg := catalogRows(t, cfg.Catalog.URI)
	if loc := reg["sluice.events"]; len(reg) != 1 || !strings.HasPrefix(loc, "s3://"+coldtest.Bucket+"/pg-catalog/sluice/events/metadata/") {
		t.Errorf("iceberg_tables in PostgreSQL: %v, want sluice.events with its metadata under the warehouse", reg)
	}

	v := readIceberg(t, cfg, "events")
	if !reflect.DeepEqual(v.PyIceberg, wantCold) {
		t.Errorf("pyiceberg rows differ: %d rows, first %v; want %d, first %v", len(v.PyIceberg), first(v.PyIceberg), len(wantCold), first(wantCold))
	}
	if !reflect.DeepEqual(v.DuckDB, wantCold) { // the files pyiceberg's plan lists
		t.Errorf("duckdb rows differ: %d rows, first %v; want %d, first %v", len(v.DuckDB), first(v.DuckDB), len(wantCold), first(wantCold))
	}
	if len(v.Snapshots) != 1 || v.Snapshots[0]["sluice.node"] != "test-node" {
		t.Errorf("snapshots %v: want the run's one", v.Snapshots)
	}

	// A second compactor (a restarted server) loads the table from the catalog.
	c.Close()
	c2, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if again := tieredRows(t, c2, table.Query{}); !reflect.DeepEqual(again, wantAll) {
		t.Errorf("after reopening: %d rows, want %d", len(again), len(wantAll))
	}
}

// TestPostgresTwoNodesCommitToOneTable: two nodes start together on a new
// PostgreSQL catalog database (both create the catalog's tables, the
// namespace and the Iceberg table at once), then compact six days each
// concurrently; conflicting commits are retried and each row is in the
// table once.
func TestPostgresTwoNodesCommitToOneTable(t *testing.T) {
	dir := t.TempDir()
	twoNodesCommit(t, dir, pgConfig(t, dir, "pg-two-nodes", "two_nodes"), true)
}

// TestPostgresCredentialsFromEnvironment: a connection string without
// credentials (the URL form, libpq's keyword/value form, and a bare
// "postgres://" that leaves everything to PG* variables) takes them from
// PGUSER and PGPASSWORD; without PGPASSWORD the server refuses, so the
// password did come from the environment. Each form compacts through the
// catalog (the first run creates the table, the second finds it).
func TestPostgresCredentialsFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	srv := postgres(t)
	cfg := pgConfig(t, dir, "pg-env", "env_creds")
	u, err := url.Parse(cfg.Catalog.URI)
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 100, 1)

	addr := net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port))
	forms := map[string]string{
		"url":           "postgres://" + addr + "/" + database + "?sslmode=disable",
		"keyword/value": srv.ConnString(database),
		"environment":   "postgres://", // host, port, database and sslmode from PG* too
	}
	for name, uri := range forms {
		t.Run(name, func(t *testing.T) {
			if uri == "postgres://" {
				t.Setenv("PGHOST", srv.Host)
				t.Setenv("PGPORT", strconv.Itoa(srv.Port))
				t.Setenv("PGDATABASE", database)
				t.Setenv("PGSSLMODE", "disable")
			}
			t.Setenv("PGUSER", pgtest.User)
			t.Setenv("PGPASSWORD", "")
			cfg.Catalog.URI = uri
			_, err := coldtier.Open(ctx, cfg, tb)
			if err == nil || !strings.Contains(err.Error(), "password") {
				t.Fatalf("open without PGPASSWORD: %v, want the server's password error", err)
			}
			t.Setenv("PGPASSWORD", pgtest.Password)
			c, err := coldtier.Open(ctx, cfg, tb)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
				t.Fatal(err)
			}
			if rows := tieredRows(t, c, table.Query{}); len(rows) != 100 {
				t.Errorf("%d rows over both tiers, want 100", len(rows))
			}
		})
	}
	if reg := catalogRows(t, srv.URL(database)); len(reg) != 1 {
		t.Errorf("iceberg_tables: %v, want the events table", reg)
	}
}

// TestPostgresCatalogErrors: an unreachable server is named by host and
// port, the password never appears in an error, and a URI with another
// scheme is refused before anything is opened.
func TestPostgresCatalogErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "pg-errors")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	cfg.Catalog.URI = "postgres://sluice:s3cret-pw@" + addr + "/iceberg?sslmode=disable"
	_, err = coldtier.Open(ctx, cfg, tb)
	if err == nil {
		t.Fatal("opened a catalog on a closed port")
	}
	if !strings.Contains(err.Error(), "PostgreSQL "+addr) || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error %q: want it to name PostgreSQL %s and not show the password", err, addr)
	}

	for _, uri := range []string{"mysql://u:p@127.0.0.1/db", "sqlite:///tmp/x.db"} {
		cfg.Catalog.URI = uri
		_, err := coldtier.Open(ctx, cfg, tb)
		if !errors.Is(err, catalog.ErrCatalogURI) || !strings.Contains(err.Error(), "unknown scheme") {
			t.Errorf("uri %s: %v, want ErrCatalogURI naming the unknown scheme", uri, err)
		}
	}
	cfg.Catalog.URI = "postgres://sluice:s3cret-pw@127.0.0.1:notaport/db"
	if _, err := coldtier.Open(ctx, cfg, tb); !errors.Is(err, catalog.ErrCatalogURI) || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("bad port: %v, want ErrCatalogURI without the password", err)
	}
}

// TestPostgresNodesStartTogether: four nodes start together on a new
// catalog database and compact at once, so each runs iceberg-go's CREATE
// TABLE IF NOT EXISTS for the catalog's tables, creates the namespace and
// the Iceberg table and commits at the same time. PostgreSQL lets the
// losers of the CREATE race fail (a unique violation in its system
// catalogs), which Open retries; under SERIALIZABLE (a site's
// default_transaction_isolation) iceberg-go's own re-check of a namespace
// created meanwhile does not see it either, which loadOrCreate re-checks.
// Every node's rows end up in the table once.
func TestPostgresNodesStartTogether(t *testing.T) {
	for _, isolation := range []string{"read committed", "serializable"} {
		t.Run(isolation, func(t *testing.T) {
			dir := t.TempDir()
			const nodes, rows = 4, 50
			stores := make([]*table.Table, nodes)
			for node := range nodes {
				st, tb := openTable(t, filepath.Join(dir, fmt.Sprintf("node%d", node)), staticSchema)
				defer st.Close()
				fill(t, tb, node*1000, rows, 1)
				stores[node] = tb
			}
			cfg := pgConfig(t, dir, "pg-start-"+strings.ReplaceAll(isolation, " ", "-"), "start")
			setIsolation(t, cfg, isolation)
			var wg sync.WaitGroup
			errs := make([]error, nodes)
			start := make(chan struct{})
			compactors := make([]*coldtier.Compactor, nodes)
			defer func() { // before the stores close
				for _, c := range compactors {
					if c != nil {
						c.Close()
					}
				}
			}()
			for node := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ncfg := cfg
					ncfg.Node = fmt.Sprintf("node%d", node)
					ncfg.StateDir = filepath.Join(dir, ncfg.Node)
					c, err := coldtier.Open(ctx(), ncfg, stores[node])
					if err != nil {
						errs[node] = fmt.Errorf("node %d: open: %w", node, err)
						return
					}
					compactors[node] = c
					if _, err := c.Compact(ctx(), day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
						errs[node] = fmt.Errorf("node %d: compact: %w", node, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if t.Failed() {
				return
			}
			// Node 0's query over both tiers: every node's rows, once.
			seen := map[int64]int{}
			err := compactors[0].QueryValues(ctx(), table.Query{}, true, func(cols []table.Column, vals []any) error {
				for i, col := range cols {
					if col.Name == "n" {
						seen[vals[i].(int64)]++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != nodes*rows {
				t.Errorf("%d distinct rows, want %d", len(seen), nodes*rows)
			}
			for n, k := range seen {
				if k != 1 {
					t.Errorf("row n=%d %d times", n, k)
				}
			}
		})
	}
}

func ctx() context.Context { return context.Background() }

// setIsolation makes isolation the default of the catalog's database.
func setIsolation(t testing.TB, cfg coldtier.Config, isolation string) {
	t.Helper()
	u, err := url.Parse(cfg.Catalog.URI)
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	if err := postgres(t).Exec(context.Background(), "postgres", fmt.Sprintf("ALTER DATABASE %s SET default_transaction_isolation = '%s'",
		pgx.Identifier{database}.Sanitize(), isolation)); err != nil {
		t.Fatal(err)
	}
}

// holdLock runs lockSQL in a transaction of its own on the catalog's
// database and returns a release function, which waits until waiters
// sessions wait on that lock, then commits: the waiters then meet exactly
// as two nodes that arrive at the same moment.
func holdLock(t *testing.T, uri, lockSQL string, waiters int) (release func()) {
	t.Helper()
	c := context.Background()
	holder, err := pgx.Connect(c, uri)
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := pgx.Connect(c, uri)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(c, lockSQL); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		defer holder.Close(c)
		defer watcher.Close(c)
		deadline := time.Now().Add(60 * time.Second)
		for {
			var n int
			if err := watcher.QueryRow(c, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
				t.Error(err)
				break
			}
			if n >= waiters {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%d sessions wait on the lock after 60s, want %d", n, waiters)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := tx.Commit(c); err != nil {
			t.Error(err)
		}
	}
}

// twoNodesMeet opens two nodes (100 rows over two days each) on cfg, runs
// prepare, then compacts both nodes through the second day at once while
// lockSQL holds them at the same point, and checks that both runs succeed
// and every row is in the table once. It returns the commit retries of
// both nodes.
func twoNodesMeet(t *testing.T, cfg coldtier.Config, prepare func(nodes [2]*coldtier.Compactor), lockSQL string) int64 {
	t.Helper()
	dir := t.TempDir()
	var nodes [2]*coldtier.Compactor
	for node := range 2 {
		st, tb := openTable(t, filepath.Join(dir, fmt.Sprintf("node%d", node)), staticSchema)
		defer st.Close()
		fill(t, tb, node*1000, 100, 2)
		ncfg := cfg
		ncfg.Node = fmt.Sprintf("node%d", node)
		ncfg.StateDir = filepath.Join(dir, ncfg.Node)
		c, err := coldtier.Open(ctx(), ncfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes[node] = c
	}
	prepare(nodes)
	release := holdLock(t, cfg.Catalog.URI, lockSQL, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for node, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[node] = c.Compact(ctx(), day0.Add(48*time.Hour), coldtier.Options{Remove: true})
		}()
	}
	release()
	wg.Wait()
	for node, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", node, err)
		}
	}
	// All rows are cold now: node 0's query over both tiers sees both nodes'.
	seen := map[int64]int{}
	err := nodes[0].QueryValues(ctx(), table.Query{}, true, func(cols []table.Column, vals []any) error {
		for i, col := range cols {
			if col.Name == "n" {
				seen[vals[i].(int64)]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct rows, want 200", len(seen))
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("row n=%d %d times", n, k)
		}
	}
	return nodes[0].Counters().CommitRetries.Load() + nodes[1].Counters().CommitRetries.Load()
}

// TestPostgresCommitConflict: two nodes commit to the same Iceberg table at
// the same moment (a lock on the catalog row holds both UPDATEs until both
// wait). At READ COMMITTED the second UPDATE finds the metadata location
// moved and matches no row (iceberg-go's ErrCommitFailed); at SERIALIZABLE
// PostgreSQL aborts it with serialization_failure (SQLSTATE 40001), which
// Compactor.commit must also take as a conflict. Either way the loser
// retries on the fresh table and every row is in the table once.
func TestPostgresCommitConflict(t *testing.T) {
	for _, isolation := range []string{"read committed", "serializable"} {
		t.Run(isolation, func(t *testing.T) {
			cfg := pgConfig(t, t.TempDir(), "pg-conflict-"+strings.ReplaceAll(isolation, " ", "-"), "conflict")
			setIsolation(t, cfg, isolation)
			retries := twoNodesMeet(t, cfg, func(nodes [2]*coldtier.Compactor) {
				// the first day, one node after the other: creates the table
				for _, c := range nodes {
					if _, err := c.Compact(ctx(), day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
						t.Fatal(err)
					}
				}
			}, "SELECT 1 FROM iceberg_tables FOR UPDATE")
			if retries == 0 {
				t.Error("no commit was retried: the two commits did not meet")
			}
		})
	}
}

// TestPostgresNamespaceCreatedMeanwhile: two nodes create the namespace at
// the same moment (a lock on iceberg_namespace_properties holds both
// INSERTs until both wait). The loser's insert fails with a unique
// violation; iceberg-go re-reads inside the failed transaction to tell
// "created meanwhile", which at SERIALIZABLE does not see the winner's
// row; loadOrCreate checks again in a new transaction.
func TestPostgresNamespaceCreatedMeanwhile(t *testing.T) {
	for _, isolation := range []string{"read committed", "serializable"} {
		t.Run(isolation, func(t *testing.T) {
			cfg := pgConfig(t, t.TempDir(), "pg-namespace-"+strings.ReplaceAll(isolation, " ", "-"), "namespace")
			setIsolation(t, cfg, isolation)
			twoNodesMeet(t, cfg, func([2]*coldtier.Compactor) {}, "LOCK TABLE iceberg_namespace_properties IN EXCLUSIVE MODE")
		})
	}
}
