package s3http_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
)

// TestSignedRequestsWithAwkwardKeys: keys with spaces, '+', '=', '~' and
// UTF-8 are signed right (versitygw checks every signature) for PUT, GET
// with and without If-None-Match, and a listing whose prefix needs
// encoding too; a wrong secret is ErrForbidden, a missing key ErrNotFound.
func TestSignedRequestsWithAwkwardKeys(t *testing.T) {
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	defer srv.Stop()
	keys := func(secret string) func() (s3http.Credentials, error) {
		return func() (s3http.Credentials, error) {
			return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: secret}, nil
		}
	}
	c := &s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true, Credentials: keys(coldtest.SecretKey)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = "dir with space/a+b=c~d/ünï.lua"
	etag, err := c.Put(ctx, coldtest.Bucket, key, []byte("x = 1"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.Get(ctx, coldtest.Bucket, key, "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(body) != "x = 1" || obj.ETag != etag {
		t.Fatalf("GET = %q %s, want x = 1 %s", body, obj.ETag, etag)
	}
	if obj, err := c.Get(ctx, coldtest.Bucket, key, etag); err != nil || !obj.NotModified {
		t.Fatalf("GET If-None-Match the same ETag = %+v, %v; want NotModified", obj, err)
	}
	list, err := c.List(ctx, coldtest.Bucket, "dir with space/a+b", "")
	if err != nil || len(list) != 1 || list[0].Key != key {
		t.Fatalf("List = %+v, %v; want the one key", list, err)
	}
	if _, err := c.Get(ctx, coldtest.Bucket, "nope", ""); !errors.Is(err, s3http.ErrNotFound) {
		t.Fatalf("missing key: %v, want ErrNotFound", err)
	}
	bad := *c
	bad.Credentials = keys("wrong")
	if _, err := bad.Get(ctx, coldtest.Bucket, key, ""); !errors.Is(err, s3http.ErrForbidden) {
		t.Fatalf("wrong secret: %v, want ErrForbidden", err)
	}
}
