package sqsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
	"github.com/sluicedb/sluice/internal/testsqs"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/stream/sqsqueue"
	"github.com/sluicedb/sluice/table"
)

// env is a bucket on versitygw and a queue on moto's SQS server.
type env struct {
	bucket   *s3http.Client
	s3opts   stream.S3Options
	sqs      *sqs.Client
	queueURL string
	sqsCfg   stream.SQSConfig
}

func start(t *testing.T, visibility int) *env {
	t.Helper()
	mq := testsqs.StartT(t)
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	t.Cleanup(srv.Stop)
	s3creds := func() (s3http.Credentials, error) {
		return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
	}
	sqsCreds := func() (s3http.Credentials, error) {
		return s3http.Credentials{AccessKey: "test", SecretKey: "test"}, nil
	}
	e := &env{
		bucket: &s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: s3creds},
		s3opts: stream.S3Options{Bucket: coldtest.Bucket, Prefix: "in/", Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: s3creds},
	}
	e.sqs = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(mq.Endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("objects"),
		Attributes: map[string]string{"VisibilityTimeout": fmt.Sprint(visibility)}})
	if err != nil {
		t.Fatal(err)
	}
	e.queueURL = aws.ToString(out.QueueUrl)
	e.sqsCfg = stream.SQSConfig{Queue: e.queueURL, Endpoint: mq.Endpoint, Region: "us-east-1", Credentials: sqsCreds}
	return e
}

// put stores an object and sends the queue the S3 event notification AWS
// would (versitygw sends notifications to webhooks and Kafka/NATS, not to
// SQS, so the test sends it, in the shape S3 sends: event version 2.1).
func (e *env) put(t *testing.T, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etag, err := e.bucket.Put(ctx, coldtest.Bucket, key, data)
	if err != nil {
		t.Fatal(err)
	}
	e.notify(t, key, len(data), etag)
}

// notify sends the queue the notification of an object.
func (e *env) notify(t *testing.T, key string, size int, etag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1",
"eventTime":"2026-11-29T10:00:00.000Z","eventName":"ObjectCreated:Put","userIdentity":{"principalId":"AWS:X"},
"requestParameters":{"sourceIPAddress":"127.0.0.1"},"responseElements":{"x-amz-request-id":"R","x-amz-id-2":"I"},
"s3":{"s3SchemaVersion":"1.0","configurationId":"objects","bucket":{"name":%q,"ownerIdentity":{"principalId":"X"},
"arn":"arn:aws:s3:::%s"},"object":{"key":%q,"size":%d,"eTag":%q,"sequencer":"0055AED6DCD90281E5"}}}]}`,
		coldtest.Bucket, coldtest.Bucket, key, size, trimQuotes(etag))
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queueURL), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// queued is the number of messages in the queue, visible or not.
func (e *env) queued(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.queueURL),
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var x int
		fmt.Sscan(v, &x)
		n += x
	}
	return n
}

func openTarget(t *testing.T, dir string) (stream.Target, func()) {
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
	return stream.Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Reject,
		Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}, func() { s.Close() }
}

func ids(t *testing.T, tb *table.Table) map[int64]int {
	t.Helper()
	got := map[int64]int{}
	if err := tb.Query(context.Background(), table.Query{}, func(r table.Row) error {
		got[r["id"].(int64)]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openQueue opens the queue with a short long poll.
func openQueue(t *testing.T, e *env) stream.Notifications {
	t.Helper()
	q, err := sqsqueue.Open(context.Background(), e.sqsCfg)
	if err != nil {
		t.Fatal(err)
	}
	q.(*sqsqueue.Queue).WaitSeconds = 1
	return q
}

// dieBeforeAck is the queue of a node that dies after storing an object's
// rows and before deleting its message: it stops its run there.
type dieBeforeAck struct {
	stream.Notifications
	die  context.CancelFunc
	died atomic.Bool
}

var errDied = errors.New("died between storing the rows and deleting the message")

func (d *dieBeforeAck) Receive(ctx context.Context) ([]stream.Notice, error) {
	ns, err := d.Notifications.Receive(ctx)
	for i := range ns {
		ns[i].Ack = func(context.Context) error {
			d.died.Store(true)
			d.die()
			return errDied
		}
	}
	return ns, err
}

// TestSQSNotifiedObjectStoredOnce: objects announced through a real SQS
// queue are stored; a node that stops after storing an object's rows and
// before deleting its message (the message comes back after its visibility
// timeout) and starts again on its store stores it once, deletes the
// message, and ends with an empty queue; a poison object goes to the dead
// letters; the notice of an object deleted since is dropped.
func TestSQSNotifiedObjectStoredOnce(t *testing.T) {
	e := start(t, 1)
	e.put(t, "in/a.ndjson", []byte(`{"id":1}`+"\n"+`{"id":2}`+"\n"))
	dir := t.TempDir()

	target, closeStore := openTarget(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := &dieBeforeAck{Notifications: openQueue(t, e), die: cancel}
	opts := e.s3opts
	opts.Notifications = q
	src, err := stream.NewS3(target, "events", opts)
	if err != nil {
		t.Fatal(err)
	}
	src.Run(ctx)
	if !q.died.Load() {
		t.Fatal("the first run ended before acknowledging a message")
	}
	if got := ids(t, target.Table); len(got) != 2 {
		t.Fatalf("the first run stored %v, want ids 1 and 2", got)
	}
	closeStore()

	// The restart: a new source on the same store, the message still queued.
	target, closeStore = openTarget(t, dir)
	defer closeStore()
	opts.Notifications = openQueue(t, e)
	src, err = stream.NewS3(target, "events", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	e.put(t, "in/b.csv", []byte("id\n3\n"))
	e.put(t, "in/bad.ndjson", []byte(`{"id":`+"\n"))
	e.notify(t, "in/gone.ndjson", 9, "0123456789abcdef0123456789abcdef") // deleted before it was read
	waitFor(t, "ids 1-3 and the queue empty", func() bool { return len(ids(t, target.Table)) == 3 && e.queued(t) == 0 })
	cancel()
	<-done
	for id, n := range ids(t, target.Table) {
		if n != 1 {
			t.Errorf("id %d stored %d times", id, n)
		}
	}
	var dead []table.Row
	target.DeadLetters.Query(context.Background(), table.Query{}, func(r table.Row) error {
		dead = append(dead, table.Row{"origin": r["origin"], "error": r["error"]})
		return nil
	})
	if len(dead) != 1 || dead[0]["origin"] != "s3://warehouse/in/bad.ndjson" {
		t.Fatalf("dead letters = %v, want one of s3://warehouse/in/bad.ndjson", dead)
	}
}
