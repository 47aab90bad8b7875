package compute

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute/plugbuild"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
	"github.com/sluicedb/sluice/internal/secret"
)

// startBucket starts versitygw (its bucket is coldtest.Bucket) and returns
// the options that reach it with its keys, and a client to fill it.
func startBucket(t *testing.T) (*S3Options, *s3http.Client) {
	t.Helper()
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	t.Cleanup(srv.Stop)
	opts := &S3Options{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true,
		AccessKey: secret.Inline(coldtest.AccessKey), SecretKey: secret.Inline(coldtest.SecretKey)}
	return opts, &s3http.Client{Endpoint: srv.Endpoint, Region: coldtest.Region, PathStyle: true,
		Credentials: func() (s3http.Credentials, error) {
			return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
		}}
}

func put(t *testing.T, c *s3http.Client, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, coldtest.Bucket, key, data); err != nil {
		t.Fatal(err)
	}
}

// notModifiedCounter counts the 304 answers a client receives.
type notModifiedCounter struct {
	n atomic.Int64
}

func (c *notModifiedCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusNotModified {
		c.n.Add(1)
	}
	return resp, err
}

// TestS3ScriptLoadAndReload: a script in the bucket computes the column; an
// unchanged object is answered 304 to the poll's If-None-Match, and a
// replaced one is swapped in.
func TestS3ScriptLoadAndReload(t *testing.T) {
	s3, bucket := startBucket(t)
	put(t, bucket, "scripts/v.lua", []byte("function main(row) return 'v1:' .. row.name end"))
	counter := &notModifiedCounter{}
	cfg := Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: "s3://" + coldtest.Bucket + "/scripts/v.lua", S3: s3}, Type: "string"}}}
	p, err := New(context.Background(), cfg, Options{Lua: newManager(t), HTTPClient: &http.Client{Transport: counter, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	value := func() any {
		b, err := p.Process(context.Background(), []map[string]any{{"name": "a"}})
		if err != nil || len(b.Errors) > 0 {
			t.Fatal(err, b.Errors)
		}
		return b.Rows[0]["v"]
	}
	if v := value(); v != "v1:a" {
		t.Fatalf("v = %v, want v1:a", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Reload(ctx); err != nil || value() != "v1:a" {
		t.Fatalf("unchanged object: %v, v = %v", err, value())
	}
	if counter.n.Load() != 1 {
		t.Fatalf("the poll of an unchanged object got %d 304 answers, want 1 (no conditional GET?)", counter.n.Load())
	}
	put(t, bucket, "scripts/v.lua", []byte("function main(row) return 'v2:' .. row.name end"))
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "v2:a" {
		t.Fatalf("after the object was replaced v = %v, want v2:a", v)
	}
	if st := p.Stats(); st[0].Reloads != 1 || st[0].Source != "s3://warehouse/scripts/v.lua" {
		t.Fatalf("stats = %+v, want one reload of s3://warehouse/scripts/v.lua", st[0])
	}
}

// TestS3SourceErrorsNameBucketAndKey: a missing object and refused keys are
// load errors that name the bucket and key and say which it was.
func TestS3SourceErrorsNameBucketAndKey(t *testing.T) {
	s3, _ := startBucket(t)
	load := func(s3 *S3Options, uri string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := New(ctx, Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: uri, S3: s3}, Type: "string"}}}, Options{Lua: newManager(t)})
		if err == nil {
			p.Close()
		}
		return err
	}
	err := load(s3, "s3://warehouse/scripts/missing.lua")
	if !errors.Is(err, s3http.ErrNotFound) || !strings.Contains(err.Error(), "s3://warehouse/scripts/missing.lua") {
		t.Fatalf("missing object: %v, want ErrNotFound naming s3://warehouse/scripts/missing.lua", err)
	}
	wrong := *s3
	wrong.SecretKey = secret.Inline("not-the-secret")
	err = load(&wrong, "s3://warehouse/scripts/v.lua")
	if !errors.Is(err, s3http.ErrForbidden) || !strings.Contains(err.Error(), "s3://warehouse/scripts/v.lua") {
		t.Fatalf("wrong secret key: %v, want ErrForbidden naming s3://warehouse/scripts/v.lua", err)
	}
}

// TestS3DefaultsFromOptions: a column without an s3 section is read with
// the processor's default (the server gives its table's cold-tier endpoint)
// and the environment's keys.
func TestS3DefaultsFromOptions(t *testing.T) {
	s3, bucket := startBucket(t)
	put(t, bucket, "d.lua", []byte("function main(row) return 'd' end"))
	t.Setenv("AWS_ACCESS_KEY_ID", coldtest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", coldtest.SecretKey)
	p := newProcessor(t, "computed:\n  - {name: v, type: string, func: 's3://warehouse/d.lua'}\n",
		Options{S3: &S3Options{Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: true}})
	b, err := p.Process(context.Background(), []map[string]any{{}})
	if err != nil || b.Rows[0]["v"] != "d" {
		t.Fatalf("v = %v, %v", b.Rows[0]["v"], err)
	}
}

// TestS3Plugin: a Go plugin in the bucket is downloaded under its content
// hash, checked and opened; a replaced one is a new version.
func TestS3Plugin(t *testing.T) {
	testPluginPath(t) // skips (fails under CI) where plugins cannot be built
	dir := t.TempDir()
	v1 := plugbuild.Build(t, dir, "s1.so", "package main\nfunc S3Version(map[string]interface{}) (interface{}, error) { return \"s1\", nil }\n")
	v2 := plugbuild.Build(t, dir, "s2.so", "package main\nfunc S3Version(map[string]interface{}) (interface{}, error) { return \"s2\", nil }\n")
	s3, bucket := startBucket(t)
	read := func(path string) []byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	put(t, bucket, "plugins/version.so", read(v1))
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: "s3://warehouse/plugins/version.so", FuncName: "S3Version", S3: s3}, Type: "string"}}}, Options{PluginDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	value := func() any {
		b, err := p.Process(context.Background(), []map[string]any{{}})
		if err != nil || len(b.Errors) > 0 {
			t.Fatal(err, b.Errors)
		}
		return b.Rows[0]["v"]
	}
	if v := value(); v != "s1" {
		t.Fatalf("v = %v, want s1", v)
	}
	put(t, bucket, "plugins/version.so", read(v2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "s2" {
		t.Fatalf("after the object was replaced v = %v, want s2", v)
	}
}
