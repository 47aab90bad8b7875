// Package sqsqueue reads an S3 source's event notifications from an SQS
// queue with the AWS SDK's SQS client. It is linked by sluice-full only
// (its main calls stream.EnableSQS(sqsqueue.Open)): the lean binary carries
// no AWS SDK and lists its S3 sources' prefixes instead.
package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicedb/sluice/stream"
)

// Queue receives S3 event notifications from one SQS queue.
type Queue struct {
	client *sqs.Client
	url    string
	// WaitSeconds is the long poll of one Receive (SQS allows 0-20).
	WaitSeconds int32
}

// Open connects to c.Queue. Credentials and region not given come from the
// AWS SDK's default chain.
func Open(ctx context.Context, c stream.SQSConfig) (stream.Notifications, error) {
	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Credentials != nil {
		creds := c.Credentials
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			k, err := creds()
			if err != nil {
				return aws.Credentials{}, err
			}
			return aws.Credentials{AccessKeyID: k.AccessKey, SecretAccessKey: k.SecretKey, SessionToken: k.SessionToken}, nil
		})))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("sqs %s: %w", c.Queue, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	return &Queue{client: client, url: c.Queue, WaitSeconds: 20}, nil
}

// event is the part of an S3 event notification a source reads
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
type event struct {
	Records []struct {
		EventName string `json:"eventName"`
		S3        struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key  string `json:"key"`
				ETag string `json:"eTag"`
			} `json:"object"`
		} `json:"s3"`
	} `json:"Records"`
	// Event is "s3:TestEvent" in the message S3 sends when notifications
	// are set up.
	Event string `json:"Event"`
}

// Receive implements stream.Notifications: one long poll. A message's
// notices share its receipt: it is deleted once every one is acknowledged.
// A message that announces no created object (a test event, a removal) is
// deleted at once; one that is not an S3 event at all is left in the queue
// (its redrive policy moves it to the queue's dead letters).
func (q *Queue) Receive(ctx context.Context) ([]stream.Notice, error) {
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: q.WaitSeconds,
	})
	if err != nil {
		return nil, fmt.Errorf("sqs %s: receive: %w", q.url, err)
	}
	var notices []stream.Notice
	for _, m := range out.Messages {
		var ev event
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
			continue
		}
		receipt := m.ReceiptHandle
		del := func(ctx context.Context) error {
			_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: receipt})
			if err != nil {
				return fmt.Errorf("sqs %s: delete: %w", q.url, err)
			}
			return nil
		}
		var created []stream.Notice
		for _, r := range ev.Records {
			if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
				continue
			}
			// Keys come URL-encoded as a form value (a space is '+').
			key, err := url.QueryUnescape(r.S3.Object.Key)
			if err != nil {
				key = r.S3.Object.Key
			}
			created = append(created, stream.Notice{Bucket: r.S3.Bucket.Name, Key: key, ETag: r.S3.Object.ETag})
		}
		if len(created) == 0 {
			if err := del(ctx); err != nil {
				return notices, err
			}
			continue
		}
		left := new(atomic.Int32)
		left.Store(int32(len(created)))
		for i := range created {
			created[i].Ack = func(ctx context.Context) error {
				if left.Add(-1) > 0 {
					return nil
				}
				return del(ctx)
			}
		}
		notices = append(notices, created...)
	}
	return notices, nil
}

// Close implements stream.Notifications.
func (q *Queue) Close() error { return nil }
