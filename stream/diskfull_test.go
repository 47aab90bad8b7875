//go:build linux

package stream_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/internal/smallfs"
)

// TestDiskFullSourcePauses: a node consumes a JetStream stream into a store
// on a small tmpfs; the disk is filled from outside while messages keep
// arriving. The node stays up, stores nothing more, retries with backoff
// (counted in sluice_source_errors_total), reports the disk in /readyz and
// /metrics; once the space is freed it resumes by itself and every message
// is stored exactly once.
func TestDiskFullSourcePauses(t *testing.T) {
	t.Parallel()
	const n, users = 1000, 10
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DISKFULL", Subjects: []string{"diskfull.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			_, v := event(i, users)
			if _, err := js.Publish(ctx, fmt.Sprintf("diskfull.u%d", i%users), v); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	mnt := smallfs.Mount(t, 448<<20)
	data := filepath.Join(mnt, "node")
	cfg := fmt.Sprintf(`storage: {min_free_bytes: 134217728, reserve_bytes: 16777216}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: DISKFULL, subject: "diskfull.>", durable: sluice, max_batch: 100}
`, natsURL)
	nd := startNode(t, cfg, data)
	publish(0, n/2)
	waitRows(t, nd, "events", n/2, time.Minute)

	// Less than the minimum free space left: the next batches are refused.
	hog := smallfs.Fill(t, mnt, 64<<20)
	publish(n/2, n)
	deadline := time.Now().Add(30 * time.Second)
	for {
		errs, _ := nd.metric("sluice_source_errors_total", `table="events"`)
		full, _ := nd.metric("sluice_store_disk_full", "")
		if errs >= 2 && full == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no retried store error or disk_full gauge (errors %v, full %v): %s", errs, full, nd.Tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := countRows(nd, "events"); got != n/2 {
		t.Fatalf("%d rows stored on a full disk, want %d", got, n/2)
	}
	resp, err := http.Get(nd.URL + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v (the node died?): %s", err, nd.Tail())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "disk full") {
		t.Fatalf("readyz while full: %d %s", resp.StatusCode, body)
	}
	if !nd.Running() {
		t.Fatalf("the node exited on a full disk: %s", nd.Tail())
	}

	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	waitRows(t, nd, "events", n, time.Minute)
	time.Sleep(500 * time.Millisecond)
	nd.stop()
	ids, _ := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
}
