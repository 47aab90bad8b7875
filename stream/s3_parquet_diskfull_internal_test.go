//go:build linux

package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/smallfs"
	"github.com/sluicedb/sluice/table"
)

// TestS3LargeParquetSpoolDiskFull: a Parquet object spooled to a store
// whose disk lacks room for it beside the minimum free space is refused
// by the spool's free-space check before the disk fills (a disk-full
// error naming the spool, nothing stored, no file left), and stored whole
// once the space is freed.
//
// It runs without -race only (scripts/test's memory-bound phase): what it
// adds to TestS3LargeParquetSpooled, which races the spool and its decode
// under -race, is the free-space check of a copy past 16 MiB, sequential
// code, on an object of 43 MB that took 100 s under the race detector.
func TestS3LargeParquetSpoolDiskFull(t *testing.T) {
	if raceEnabled {
		t.Skip("runs without -race (scripts/test's memory-bound phase): the spool's concurrency is raced by TestS3LargeParquetSpooled")
	}
	opts, bucket := s3Bucket(t)
	opts.Prefix = "big/"
	const n = 800_000 // about 43 MB of Parquet
	data := bigParquet(t, n)
	putObject(t, bucket, "big/events.parquet", data)

	const minFree = 64 << 20
	mnt := smallfs.Mount(t, 256<<20)
	dir := filepath.Join(mnt, "node")
	s, err := table.Open(dir, table.Options{MinFreeBytes: minFree, ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "big", SortBy: "ts", HashBy: "user"})
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Store: s, Table: tb, Policy: ingest.Reject, MaxMessageBytes: 1 << 20}
	// Room for one spool step beyond the minimum, not for the object.
	hog := smallfs.Fill(t, mnt, minFree+spoolCheckBytes+4<<20)
	src := loadedS3(t, target, "big", opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err = src.listOnce(ctx)
	if !errors.Is(err, table.ErrDiskFull) || !strings.Contains(err.Error(), "spool") {
		t.Fatalf("a %d MB object spooled with %d MB free: %v, want a disk-full error of the spool", len(data)>>20, smallfs.Free(t, mnt)>>20, err)
	}
	if rows, _ := countIDs(t, tb); rows != 0 {
		t.Fatalf("%d rows stored of an object refused for lack of space", rows)
	}
	if p, _ := s.Position(S3PositionName("big", opts.Bucket, "big/events.parquet")); len(p) != 0 {
		t.Fatalf("the refused object is recorded (%q): it would not be read again", p)
	}
	if left := spooled(t, dir); len(left) != 0 {
		t.Fatalf("spooled objects left behind: %v", left)
	}
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	if err := src.listOnce(ctx); err != nil {
		t.Fatalf("with the space freed: %v", err)
	}
	if rows, sum := countIDs(t, tb); rows != n || sum != int64(n)*(n-1)/2 {
		t.Fatalf("stored %d rows (id sum %d), want %d", rows, sum, n)
	}
}
