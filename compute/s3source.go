package compute

import (
	"context"
	"fmt"

	"github.com/sluicedb/sluice/internal/s3http"
)

// S3Options say where the s3:// sources of a function are read from and
// with which keys. Zero fields fall back to the environment as the AWS SDK
// does (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY).
type S3Options struct {
	// Endpoint is an S3-compatible server's URL, e.g. http://127.0.0.1:7070.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Region signs the requests (default us-east-1).
	Region string `yaml:"region" json:"region,omitempty"`
	// PathStyle puts the bucket in the URL's path (self-hosted servers).
	PathStyle bool `yaml:"path_style" json:"path_style,omitempty"`
	// AccessKey and SecretKey return the keys, read at each request so a
	// rotated secret file is picked up; nil means the environment's. The
	// server sets them from its config's secrets (access_key, secret_key);
	// `sluice compute` reads keys from the environment only, so that its
	// YAML never holds one.
	AccessKey, SecretKey func() (string, error) `yaml:"-" json:"-"`
}

// client is the S3 client of o (nil o: the environment's).
func (o *S3Options) client() *s3http.Client {
	if o == nil {
		return &s3http.Client{}
	}
	c := &s3http.Client{Endpoint: o.Endpoint, Region: o.Region, PathStyle: o.PathStyle}
	if o.AccessKey != nil && o.SecretKey != nil {
		access, secret := o.AccessKey, o.SecretKey
		c.Credentials = func() (s3http.Credentials, error) {
			a, err := access()
			if err != nil {
				return s3http.Credentials{}, fmt.Errorf("s3 access_key: %w", err)
			}
			s, err := secret()
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
	c := s3.client()
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
