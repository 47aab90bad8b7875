package stream

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedb/sluice/table"
)

// parquetRow is a row of bigParquet.
type parquetRow struct {
	TS   time.Time `parquet:"ts,timestamp(microsecond)"`
	ID   int64     `parquet:"id"`
	User string    `parquet:"user"`
	Path string    `parquet:"path"`
}

// bigParquet is a Parquet file of n rows with ids from 0, in row groups of
// 16,384 rows, its paths distinct so that it does not compress away.
func bigParquet(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewGenericWriter[parquetRow](&b, parquet.MaxRowsPerRowGroup(16384))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rows := make([]parquetRow, 0, 4096)
	for i := range n {
		rows = append(rows, parquetRow{TS: base.Add(time.Duration(i) * time.Millisecond), ID: int64(i),
			User: fmt.Sprintf("u%d", i%50), Path: fmt.Sprintf("/api/v1/items/%d/%x", i, uint64(i)*0x9e3779b97f4a7c15)})
		if len(rows) == cap(rows) || i == n-1 {
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// spooled lists the spooled objects left under dir's staging directory.
func spooled(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	filepath.WalkDir(filepath.Join(dir, "staging"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") {
			left = append(left, path)
		}
		return nil
	})
	return left
}

// TestS3LargeParquetSpooled: a Parquet object over max_object_bytes is
// spooled to a file under the store and decoded from it (Parquet needs
// random access), every row stored once with the object's record, the
// file removed after; a restarted source does not store it again. A
// corrupt Parquet object over the bound goes to the dead letters, recorded,
// with nothing of it stored.
func TestS3LargeParquetSpooled(t *testing.T) {
	opts, bucket := s3Bucket(t)
	opts.Prefix = "big/"
	// 100,000 rows: 5.3 MB in 7 row groups, five times the bound (200,000
	// took 40-50 s of the race phase and checked nothing more).
	const n = 100_000
	data := bigParquet(t, n)
	const bound = 1 << 20
	if len(data) < 4*bound {
		t.Fatalf("the Parquet object is %d bytes: the test means it to be far over max_object_bytes (%d)", len(data), bound)
	}
	putObject(t, bucket, "big/events.parquet", data)
	corrupt := append([]byte("PAR1"), bytes.Repeat([]byte("not parquet "), 2*bound/12)...)
	putObject(t, bucket, "big/corrupt.parquet", corrupt)

	dir := t.TempDir()
	target, closeStore := bigTarget(t, dir)
	target.MaxMessageBytes = bound
	src := loadedS3(t, target, "big", opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := heapInuse()
	stop := heapPeak()
	err := src.listOnce(ctx)
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a %.1f MB Parquet object of %d rows: heap in use %d MB before, peak %d MB", float64(len(data))/(1<<20), n, base>>20, peak>>20)
	if rows, sum := countIDs(t, target.Table); rows != n || sum != int64(n)*(n-1)/2 {
		t.Fatalf("stored %d rows (id sum %d), want %d (id sum %d)", rows, sum, n, int64(n)*(n-1)/2)
	}
	var dead []table.Row
	err = target.DeadLetters.Query(ctx, table.Query{}, func(r table.Row) error {
		dead = append(dead, table.Row{"origin": r["origin"], "error": r["error"]})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0]["origin"] != "s3://warehouse/big/corrupt.parquet" || !strings.Contains(fmt.Sprint(dead[0]["error"]), "parquet") {
		t.Fatalf("dead letters = %v, want one for s3://warehouse/big/corrupt.parquet", dead)
	}
	for _, key := range []string{"big/events.parquet", "big/corrupt.parquet"} {
		if p, err := target.Store.Position(S3PositionName("big", opts.Bucket, key)); err != nil || len(p) == 0 {
			t.Fatalf("%s is not recorded: %q, %v", key, p, err)
		}
	}
	if left := spooled(t, dir); len(left) != 0 {
		t.Fatalf("spooled objects left behind: %v", left)
	}
	closeStore()

	target, closeStore = bigTarget(t, dir)
	defer closeStore()
	target.MaxMessageBytes = bound
	src = loadedS3(t, target, "big", opts)
	if err := src.listOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := countIDs(t, target.Table); rows != n {
		t.Fatalf("after a restart the table holds %d rows, want %d (stored again?)", rows, n)
	}
}
