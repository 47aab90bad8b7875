package cold

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testnode"
)

// TestStderrIsJSON runs a node as `sluice serve` runs (its own process,
// stderr its log) with an S3 warehouse and no S3 credentials: the AWS SDK
// then looks for them in the EC2 instance metadata service, and says
// "falling back to IMDSv1" in a plain-text line of its own when the
// service refuses a token; the table's commits fail. Every line the
// process writes must be JSON, the SDK's included (it goes through the
// server's logger), and the table must say it is degraded.
//
// The metadata service is the one part not real: there is none to run
// here, so an HTTP server refusing every request (403, as the one of a
// host without a role does) stands in for it.
func TestStderrIsJSON(t *testing.T) {
	coldtest.Require(t, s3Err)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no role", http.StatusForbidden)
	}))
	defer imds.Close()
	dir := t.TempDir()
	// No credentials anywhere the SDK looks, but the metadata service.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	n := &testnode.Node{Name: "node", Config: filepath.Join(dir, "sluice.yaml"), URL: "http://" + addr, Log: filepath.Join(dir, "node.log")}
	cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: %q}
tables:
  - name: events
    sortBy: ts
    compact:
      interval: 200ms
      after: 1h
      iceberg:
        warehouse: s3://%s/json-log
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        continuous: true
`, filepath.Join(dir, "data"), addr, coldtest.Bucket, s3.Endpoint)
	if err := os.WriteFile(n.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start(t)
	defer n.Kill()
	resp, err := http.Post(n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"ts":"2026-01-01T00:00:00Z","id":1}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// Degraded, and the SDK has spoken (through the server's logger).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(n.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		log, _ := os.ReadFile(n.Log)
		if strings.Contains(string(body), `degraded: table "events" cold tier`) && strings.Contains(string(log), "IMDSv1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: /readyz %d %s; log: %s", resp.StatusCode, body, n.Tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	log, err := os.ReadFile(n.Log)
	if err != nil {
		t.Fatal(err)
	}
	sdk := 0
	for i, line := range strings.Split(strings.TrimRight(string(log), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line %d is not JSON: %q", i+1, line)
			continue
		}
		if rec["component"] == "aws-sdk" {
			sdk++
		}
	}
	if sdk == 0 {
		t.Errorf("no line of the AWS SDK's in the log:\n%s", n.Tail())
	}
}
