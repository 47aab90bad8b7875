package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/s3http"
)

// TestScriptFromS3Reload: a computed column whose func is an object in a
// bucket computes its values, and a running server picks up the object
// once it is replaced (its ETag changed): the new script's values appear.
func TestScriptFromS3Reload(t *testing.T) {
	srv, err := coldtest.StartS3With(t.TempDir(), coldtest.S3Options{})
	coldtest.Require(t, err)
	defer srv.Stop()
	bucket := &s3http.Client{Endpoint: srv.Endpoint, PathStyle: true, Region: coldtest.Region,
		Credentials: func() (s3http.Credentials, error) {
			return s3http.Credentials{AccessKey: coldtest.AccessKey, SecretKey: coldtest.SecretKey}, nil
		}}
	put := func(code string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := bucket.Put(ctx, coldtest.Bucket, "scripts/v.lua", []byte(code)); err != nil {
			t.Fatal(err)
		}
	}
	put("function main(row) return 'one' end")
	cfg := `
tables:
  - name: r
    reload: 20ms
    computed:
      - name: v
        type: string
        func: s3://` + coldtest.Bucket + `/scripts/v.lua
        s3: {endpoint: "` + srv.Endpoint + `", path_style: true, access_key: ` + coldtest.AccessKey + `, secret_key: ` + coldtest.SecretKey + `}
`
	s := startServer(t, cfg, "")
	ingestV := func() string {
		if code, res, _ := post(t, s.url+"/v1/tables/r/rows", "application/x-ndjson", strings.NewReader(`{"a":1}`+"\n")); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		_, body := get(t, s.url+"/v1/tables/r/query?columns=v&limit=1000")
		l := strings.Split(strings.TrimSpace(body), "\n")
		return l[len(l)-1]
	}
	if got := ingestV(); !strings.Contains(got, `"v":"one"`) {
		t.Fatalf("the script from the bucket: %s", got)
	}
	put("function main(row) return 'two' end")
	waitFor(t, func() bool {
		_, m := get(t, s.url+"/v1/tables/r")
		return strings.Contains(m, `"Reloads":1`)
	})
	if got := ingestV(); !strings.Contains(got, `"v":"two"`) {
		t.Fatalf("after the object was replaced: %s", got)
	}
}

// TestTableS3IsTheColdTiers: a table's s3:// funcs without an s3 section
// of their own are read at its cold tier's endpoint, and at the
// environment's without a cold tier.
func TestTableS3IsTheColdTiers(t *testing.T) {
	var tc config.Table
	if got := tableS3(tc); got != nil {
		t.Fatalf("without a cold tier: %+v, want nil (the environment's)", got)
	}
	tc.Compact.Iceberg = &config.Iceberg{S3: config.IcebergS3{Endpoint: "http://127.0.0.1:7070", Region: "eu-west-1", PathStyle: true}}
	got := tableS3(tc)
	if got == nil || got.Endpoint != "http://127.0.0.1:7070" || got.Region != "eu-west-1" || !got.PathStyle {
		t.Fatalf("with a cold tier: %+v, want its endpoint, region and path style", got)
	}
}
