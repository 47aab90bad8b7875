package coldtier

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// The AWS SDK logs through the aws.Config it was loaded with, and its
// default logger writes "SDK <date> WARN ..." lines straight to os.Stderr
// (e.g. "falling back to IMDSv1" when a node has no credentials): lines
// that break a log every other line of which is JSON. iceberg-go loads that
// config itself, for each file IO, unless the context carries one
// (utils.WithAwsConfig). So every entry point of the tier that may reach
// S3 loads it with the server's logger and hands it down in its context
// (withAWS). Loading one costs about 11 ms and 1.7 MB of garbage
// (BenchmarkLoadAWSConfig), which iceberg-go paid at each file IO it
// opened; the Compactor keeps its config for awsConfigAge and then loads
// it again, so that credentials rotated in the shared files are still read
// within a minute (providers that refresh themselves, IMDS, web identity,
// keep their cache meanwhile).

// awsConfigAge is how long a loaded AWS config is used.
const awsConfigAge = time.Minute

// awsConfigs is a Compactor's loaded AWS config and when it was loaded.
type awsConfigs struct {
	mu     sync.Mutex
	cfg    *aws.Config
	loaded time.Time
}

// awsLogger is the AWS SDK's logging.Logger over slog.
type awsLogger struct{ log *slog.Logger }

func (l awsLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch c {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "aws-sdk")
}

// loadAWSConfig loads the AWS SDK's config for an s3:// warehouse with
// log as its logger (nil for another warehouse, or without a logger: the
// file IO then loads its own). The region and the credentials given in
// the config are iceberg-go's file IO properties too, which it applies
// over this config; the rest (environment, shared files, IMDS) is the
// SDK's usual chain.
func loadAWSConfig(ctx context.Context, cfg *Config, log *slog.Logger) (*aws.Config, error) {
	if log == nil || !strings.HasPrefix(cfg.Warehouse, "s3://") {
		return nil, nil
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithLogger(awsLogger{log}),
		awsconfig.WithRegion(cfg.S3.Region),
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("coldtier: load the AWS SDK config: %w", err)
	}
	// nil: iceberg-go then gives its S3 client the HTTP client it tunes
	// for many parallel uploads, as it does with a config of its own.
	ac.HTTPClient = nil
	return &ac, nil
}

// withAWS is ctx carrying an AWS config with the Compactor's logger, for
// iceberg-go's S3 file IO to use instead of loading its own. A config that
// does not load leaves ctx as it is: the file IO then loads its own and
// reports the error where it fails.
func (c *Compactor) withAWS(ctx context.Context) context.Context {
	a := &c.aws
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg == nil || time.Since(a.loaded) >= awsConfigAge {
		ac, err := loadAWSConfig(ctx, &c.cfg, c.cfg.Logger)
		if err != nil || ac == nil {
			return ctx
		}
		a.cfg, a.loaded = ac, time.Now()
	}
	return utils.WithAwsConfig(ctx, a.cfg)
}
