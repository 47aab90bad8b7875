package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/s3http"
	"github.com/sluicedb/sluice/stream"
)

// s3Credentials are the keys of an s3 section, revealed at each request so
// that a rotated secret file is picked up; nil (the environment's) when the
// section sets none.
func s3Credentials(access, secret config.Secret) func() (s3http.Credentials, error) {
	if !access.IsSet() {
		return nil
	}
	return func() (s3http.Credentials, error) {
		a, err := access.Reveal()
		if err != nil {
			return s3http.Credentials{}, fmt.Errorf("access_key: %w", err)
		}
		s, err := secret.Reveal()
		if err != nil {
			return s3http.Credentials{}, fmt.Errorf("secret_key: %w", err)
		}
		return s3http.Credentials{AccessKey: a, SecretKey: s}, nil
	}
}

// s3Source is the S3 source of a sources[].s3 section: it lists its prefix,
// or reads its queue through the SQS client a binary registered
// (stream.EnableSQS; the lean binary has none and refuses the section).
func s3Source(ctx context.Context, target stream.Target, table string, c config.S3Source) (stream.Source, error) {
	opts := stream.S3Options{
		Bucket: c.Bucket, Prefix: c.Prefix, Format: c.Format, Interval: c.Interval,
		Endpoint: c.Endpoint, Region: c.Region, PathStyle: c.PathStyle,
		Credentials: s3Credentials(c.AccessKey, c.SecretKey),
	}
	if c.Queue != "" {
		q, err := stream.OpenSQS(ctx, stream.SQSConfig{Queue: c.Queue, Endpoint: queueEndpoint(c.Queue), Region: c.Region, Credentials: opts.Credentials})
		if err != nil {
			return nil, err
		}
		opts.Notifications = q
	}
	return stream.NewS3(target, table, opts)
}

// queueEndpoint is the SQS endpoint of a queue URL: its scheme and host for
// a self-hosted server, empty (the SDK's endpoint for the region) on AWS,
// whose queue URLs name the region's endpoint anyway.
func queueEndpoint(queue string) string {
	u, err := url.Parse(queue)
	if err != nil || u.Host == "" || strings.HasSuffix(u.Hostname(), ".amazonaws.com") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// checkS3Queues is, for Check, the S3 sources with a queue this binary
// cannot read: it was built without SQS.
func checkS3Queues(cfg *config.Config) []error {
	if stream.SQSLinked() {
		return nil
	}
	var errs []error
	for _, tc := range cfg.Tables {
		for i, sc := range tc.Sources {
			if sc.S3 != nil && sc.S3.Queue != "" {
				errs = append(errs, fmt.Errorf("table %q: sources[%d] s3: queue %s: %w", tc.Name, i, sc.S3.Queue, stream.ErrNoSQS))
			}
		}
	}
	return errs
}
