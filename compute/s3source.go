package compute

import (
	"context"
	"fmt"

	"github.com/sluicedb/sluice/computeopt"
	"github.com/sluicedb/sluice/internal/s3http"
)

// S3Options say where the s3:// sources of a function are read from and
// with which keys (computeopt.S3: a function's s3 section). Zero fields
// fall back to the environment as the AWS SDK does. The server sets the
// keys from its config's secrets; `sluice compute` reads keys from the
// environment only, so that its YAML never holds one (ParseConfig).
type S3Options = computeopt.S3

// s3Client is the S3 client of o (nil o: the environment's).
func s3Client(o *S3Options) *s3http.Client {
	if o == nil {
		return &s3http.Client{}
	}
	c := &s3http.Client{Endpoint: o.Endpoint, Region: o.Region, PathStyle: o.PathStyle}
	if o.AccessKey.IsSet() && o.SecretKey.IsSet() {
		// revealed at each request, so that a rotated secret file is used
		access, secret := o.AccessKey, o.SecretKey
		c.Credentials = func() (s3http.Credentials, error) {
			a, err := access.Reveal()
			if err != nil {
				return s3http.Credentials{}, fmt.Errorf("s3 access_key: %w", err)
			}
			s, err := secret.Reveal()
			if err != nil {
				return s3http.Credentials{}, fmt.Errorf("s3 secret_key: %w", err)
			}
			return s3http.Credentials{AccessKey: a, SecretKey: s}, nil
		}
	}
	return c
}

// fetchS3 reads an s3:// source, asking the server for it only if its ETag
// changed since prev (If-None-Match), as fetchHTTP does for URLs.
func (f *fetcher) fetchS3(ctx context.Context, src Source, s3 *S3Options, prev fetchState) (fetched, fetchState, bool, error) {
	etag := ""
	if prev.have {
		etag = prev.etag
	}
	c := s3Client(s3)
	c.HTTP = f.client
	obj, err := c.Get(ctx, src.Bucket, src.Key, etag)
	if err != nil {
		return fetched{}, prev, false, err
	}
	if obj.NotModified {
		return fetched{}, prev, false, nil
	}
	defer obj.Body.Close()
	return f.readBody(src, prev, obj.Body, fetchState{etag: obj.ETag})
}
