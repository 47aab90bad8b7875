package coldtier

import (
	"context"
	"log/slog"
	"testing"
)

// BenchmarkLoadAWSConfig is what loading the S3 file IO's AWS config
// costs: what iceberg-go paid at each file IO it opened, and why a
// Compactor keeps its config for awsConfigAge.
func BenchmarkLoadAWSConfig(b *testing.B) {
	cfg := &Config{Warehouse: "s3://bucket/x", S3: S3{Region: "us-east-1"}}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := loadAWSConfig(context.Background(), cfg, log); err != nil {
			b.Fatal(err)
		}
	}
}
