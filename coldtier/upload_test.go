package coldtier_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	icebergio "github.com/apache/iceberg-go/io"
	"gocloud.dev/blob"

	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/coldtest"
)

// TestLeanUploads: a file the maintenance rewrite writes through
// catalog.LeanUploads goes up to the S3 server in 5 MiB parts (its
// multipart ETag counts them: 21 MiB in 5 parts, where the transfer
// manager's default 8 MiB parts make 3), and reads back whole.
func TestLeanUploads(t *testing.T) {
	coldtest.Require(t, s3Err)
	ctx := context.Background()
	props := map[string]string{
		icebergio.S3Region: coldtest.Region, icebergio.S3EndpointURL: s3.Endpoint,
		icebergio.S3ForceVirtualAddressing: "false",
		icebergio.S3AccessKeyID:            coldtest.AccessKey, icebergio.S3SecretAccessKey: coldtest.SecretKey,
	}
	root := "s3://" + coldtest.Bucket + "/lean-uploads"
	fs, err := catalog.LeanUploads(icebergio.LoadFSFunc(props, root))(ctx)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("0123456789abcdef"), 21<<20/16)
	w, err := fs.(icebergio.WriteFileIO).Create(root + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, ok := fs.(interface {
		Attributes(ctx context.Context, key string) (*blob.Attributes, error)
	})
	if !ok {
		t.Fatalf("%T is not the S3 file IO", fs)
	}
	attrs, err := b.Attributes(ctx, "lean-uploads/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.Trim(attrs.ETag, `"`), "-5") {
		t.Errorf("ETag %s of a 21 MiB file, want a multipart upload of 5 parts (-5)", attrs.ETag)
	}
	got, err := fs.(icebergio.ReadFileIO).ReadFile(root + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("read back %d bytes, differing from the %d written", len(got), len(content))
	}
	fs.Remove(root + "/big.bin")
}
