package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
)

// TestS3KillPoints: a sluice node listing a bucket prefix is killed
// (SIGKILL, table.FaultEnv) right after and right before single commits of
// an object's rows with its record, restarted each time on the same store,
// and ends with every id of every object exactly once.
func TestS3KillPoints(t *testing.T) {
	t.Parallel()
	s3KillPoints(t, 100, "", []string{"after-commit:1", "before-commit:1", "after-commit:2", "before-commit:2"})
}

// TestS3StreamedKillPoints: the same with objects over max_object_bytes,
// each streamed into a table.Stage, killed right before and right after
// the Ingest that publishes an object's rows with its record.
func TestS3StreamedKillPoints(t *testing.T) {
	t.Parallel()
	s3KillPoints(t, 2000, ", max_object_bytes: 16384", []string{"publish-after-ingest:1", "publish-before-ingest:1", "publish-after-ingest:2", "publish-before-ingest:2"})
}

// s3KillPoints lists objects of per rows each with the s3 source settings
// extra, killing the node at each of points and restarting it.
func s3KillPoints(t *testing.T, per int, extra string, points []string) {
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	defer srv.Stop()
	bucket := &s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true,
		Credentials: func() (s3http.Credentials, error) {
			return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
		}}
	const objects, users = 6, 20
	for o := range objects {
		var b bytes.Buffer
		for i := o * per; i < (o+1)*per; i++ {
			_, v := event(i, users)
			b.Write(v)
			b.WriteByte('\n')
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := bucket.Put(ctx, coldtest.Bucket, fmt.Sprintf("in/%02d.ndjson", o), b.Bytes())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - s3: {bucket: %s, prefix: in/, interval: 50ms, endpoint: %q, path_style: true, access_key: %s, secret_key: %s%s}
`, coldtest.Bucket, srv.Endpoint, coldtest.AccessKey, coldtest.SecretKey, extra)
	data := filepath.Join(t.TempDir(), "node1")
	for _, point := range points {
		runToFault(t, cfg, data, point)
		ids, _ := storedIDs(t, data, "events")
		t.Logf("killed at %s: %d ids stored", point, len(ids))
	}
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", objects*per, time.Minute)
	time.Sleep(300 * time.Millisecond) // a few more listings: nothing more may come
	nd.stop()
	ids, _ := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, objects*per)
}
