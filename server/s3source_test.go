package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/stream"
)

// TestS3QueueNeedsSQS: a binary without an SQS client (this test binary,
// like the lean sluice) refuses an S3 source with a queue, naming the
// table, the source and the queue, at Check and at New; listing needs none.
func TestS3QueueNeedsSQS(t *testing.T) {
	const cfgText = `
tables:
  - name: events
    sources:
      - s3: {bucket: b, prefix: in/, queue: "http://127.0.0.1:1/123456789012/objects"}
`
	cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = Check(context.Background(), cfg)
	if !errors.Is(err, stream.ErrNoSQS) || !strings.Contains(err.Error(), `table "events": sources[0] s3: queue http://127.0.0.1:1/123456789012/objects`) {
		t.Fatalf("Check = %v, want ErrNoSQS naming the table, source and queue", err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir()})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, stream.ErrNoSQS) {
		t.Fatalf("New = %v, want ErrNoSQS", err)
	}
	if got := queueEndpoint("https://sqs.eu-west-1.amazonaws.com/123456789012/objects"); got != "" {
		t.Fatalf("queueEndpoint of an AWS queue = %q, want the SDK's own", got)
	}
}
