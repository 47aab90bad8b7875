package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
	"github.com/sluicedb/sluice/table"
)

// s3Bucket starts versitygw and returns the source options that reach its
// bucket (coldtest.Bucket) and a client to fill it.
func s3Bucket(t *testing.T) (S3Options, *s3http.Client) {
	t.Helper()
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	t.Cleanup(srv.Stop)
	creds := func() (s3http.Credentials, error) {
		return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
	}
	return S3Options{Bucket: coldtest.Bucket, Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: creds},
		&s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: creds}
}

func putObject(t *testing.T, c *s3http.Client, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, coldtest.Bucket, key, data); err != nil {
		t.Fatal(err)
	}
}

func gzipped(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// s3Target opens a store with the table events and its dead letters.
func s3Target(t *testing.T, dir string) (Target, func()) {
	t.Helper()
	s, err := table.Open(dir, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "id", Type: table.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	return Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Reject,
		Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}, func() { s.Close() }
}

func queryRows(t *testing.T, tb *table.Table) []table.Row {
	t.Helper()
	var rows []table.Row
	err := tb.Query(context.Background(), table.Query{}, func(r table.Row) error {
		c := table.Row{}
		for k, v := range r {
			c[k] = v
		}
		rows = append(rows, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// waitCount waits until tb holds want rows, and fails after 30 s.
func waitCount(t *testing.T, tb *table.Table, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := len(queryRows(t, tb))
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d rows, want %d", tb.Name(), n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestS3ListingOnceAcrossRestart: listing the prefix ingests every object
// in its format (by extension, gzip by content), a new object is picked up
// by a later listing, an undecodable one goes to the dead letters with its
// bucket, key and line, and a restarted source on the same store ingests
// none of them again.
func TestS3ListingOnceAcrossRestart(t *testing.T) {
	opts, bucket := s3Bucket(t)
	opts.Prefix, opts.Interval = "in/", 20*time.Millisecond
	putObject(t, bucket, "in/a.ndjson", []byte(`{"id":1}`+"\n"+`{"id":2}`+"\n"))
	putObject(t, bucket, "in/b.csv.gz", gzipped(t, "id\n3\n4\n"))
	putObject(t, bucket, "in/c.json", []byte(`[{"id":5}]`))
	putObject(t, bucket, "in/bad.ndjson", []byte(`{"id":6}`+"\n"+`{"id":`+"\n"))
	putObject(t, bucket, "other/x.ndjson", []byte(`{"id":99}`+"\n"))
	dir := t.TempDir()
	target, closeStore := s3Target(t, dir)
	src, err := NewS3(target, "events", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	waitCount(t, target.Table, 5)
	waitCount(t, target.DeadLetters, 1)
	putObject(t, bucket, "in/d.ndjson", []byte(`{"id":7}`+"\n"))
	waitCount(t, target.Table, 6)
	cancel()
	<-done
	dead := queryRows(t, target.DeadLetters)[0]
	if dead["origin"] != "s3://warehouse/in/bad.ndjson" || !strings.Contains(dead["error"].(string), "line 2") {
		t.Fatalf("dead letter = origin %v error %v, want origin s3://warehouse/in/bad.ndjson and line 2", dead["origin"], dead["error"])
	}
	closeStore()

	target, closeStore = s3Target(t, dir)
	defer closeStore()
	src = loadedS3(t, target, "events", opts)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := src.listOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n, d := len(queryRows(t, target.Table)), len(queryRows(t, target.DeadLetters)); n != 6 || d != 1 {
		t.Fatalf("after a restart the table holds %d rows and %d dead letters, want 6 and 1 (stored again?)", n, d)
	}
	// A replaced object is a new version (a new ETag): it is ingested.
	putObject(t, bucket, "in/d.ndjson", []byte(`{"id":8}`+"\n"))
	if err := src.listOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(queryRows(t, target.Table)); n != 7 {
		t.Fatalf("after in/d.ndjson was replaced the table holds %d rows, want 7", n)
	}
}

// BenchmarkS3Source measures the S3 source end to end, on one node against
// versitygw on the same machine: list, GET, decode (NDJSON), store each
// object with its record. in-memory: b.N rounds of 8 objects of about 1 MB
// each under a fresh prefix, each held whole and stored in one synced
// batch; streamed: the same objects decoded as they are read into a
// table.Stage, published once each is read; large: one object of 32 MB a
// round, streamed (over max_object_bytes). MB/s is of object bytes.
func BenchmarkS3Source(b *testing.B) {
	srv, err := coldtest.StartS3With(b.TempDir(), coldtest.S3Options{})
	coldtest.Require(b, err)
	defer srv.Stop()
	creds := func() (s3http.Credentials, error) {
		return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
	}
	client := &s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: creds}
	object := func(size int) []byte {
		var obj bytes.Buffer
		for i := 0; obj.Len() < size; i++ {
			fmt.Fprintf(&obj, `{"ts":"2026-11-29T10:00:%02d.%06dZ","id":%d,"user":"u%d","path":"/api/v1/items/%d","status":200,"bytes":%d}`+"\n", i%60, i%1000000, i, i%50, i%1000, i*7)
		}
		return obj.Bytes()
	}
	small, large := object(1<<20), object(32<<20)
	for _, bc := range []struct {
		name        string
		obj         []byte
		objects     int
		streamAbove int64
	}{{"in-memory", small, 8, 0}, {"streamed", small, 8, 1}, {"large", large, 1, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := table.Open(b.TempDir(), table.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", HashBy: "user"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(int64(bc.objects * len(bc.obj)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				prefix := fmt.Sprintf("%s%d/", bc.name, i)
				for o := range bc.objects {
					if _, err := client.Put(ctx, coldtest.Bucket, fmt.Sprintf("%s%02d.ndjson", prefix, o), bc.obj); err != nil {
						b.Fatal(err)
					}
				}
				src, err := NewS3(Target{Store: s, Table: tb, MaxMessageBytes: 4 << 20}, "events", S3Options{Bucket: coldtest.Bucket, Prefix: prefix,
					Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: creds, streamAbove: bc.streamAbove})
				if err != nil {
					b.Fatal(err)
				}
				if err := src.loadDone(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := src.listOnce(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
