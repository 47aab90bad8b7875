package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// heavy are the packages the lean sluice must not link (docs/architecture.md):
// the cold tier and what only it needs, package plugin (every symbol
// exported, 2.5x the binary), the benchmark harnesses with the test
// servers they start and package testing, grpc-go (the gRPC listener is
// sluice-full's: grpc-go's tracing links x/net/trace and html/template,
// which make the linker keep every exported method, 14 MB of the binary),
// and the OTLP collector package with the HTTP gateway its generated code
// links (grpc-gateway's runtime, genproto's httpbody), which OTLP logs are
// served without (docs/perf/binaries.md).
var heavy = []string{
	"google.golang.org/grpc",
	"golang.org/x/net/trace",
	"html/template",
	"github.com/sluicedb/sluice/server/grpclisten",
	"go.opentelemetry.io/proto/otlp/collector/logs/v1",
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime",
	"google.golang.org/genproto/googleapis/api/httpbody",
	"github.com/sluicedb/sluice/coldtier",
	"github.com/apache/iceberg-go",
	"github.com/apache/arrow-go/v18/arrow",
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"plugin",
	"testing",
	"github.com/sluicedb/sluice/internal/coldtest",
	"github.com/sluicedb/sluice/internal/testkafka",
	"github.com/sluicedb/sluice/compute/plugbuild",
	"github.com/sluicedb/sluice/bench/compact",
}

// linked is the set of packages `go list -deps` names for sluice, built
// with the tags given.
func linked(t *testing.T, tags string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -tags %q -deps: %v", tags, err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	return deps
}

// TestLeanDeps: `go list -deps ./cmd/sluice` names none of heavy.
func TestLeanDeps(t *testing.T) {
	deps := linked(t, "")
	for _, p := range heavy {
		if deps[p] {
			t.Errorf("sluice links %s", p)
		}
	}
	if !deps["github.com/sluicedb/sluice/server"] || !deps["github.com/sluicedb/sluice/rdbtool"] {
		t.Errorf("sluice does not link server and rdbtool: the command tree is missing")
	}
}

// TestFullDepsGRPC: sluice-full links the gRPC listener.
func TestFullDepsGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../sluice-full").Output()
	if err != nil {
		t.Fatalf("go list -deps ../sluice-full: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{"github.com/sluicedb/sluice/server/grpclisten", "google.golang.org/grpc"} {
		if !slices.Contains(deps, p) {
			t.Errorf("sluice-full does not link %s: listen.grpc is served by no binary", p)
		}
	}
}

// TestLeanNamesSluiceFull: the lean binary refuses a table with
// compact.iceberg, a plugin column, an S3 source's queue and listen.grpc
// with an error naming what is missing and a hint naming sluice-full, and
// serves everything else.
func TestLeanNamesSluiceFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	iceberg := write("iceberg.yaml", fmt.Sprintf(`
storage: {dir: %q}
tables:
  - name: plain
    hashBy: user
  - name: events
    hashBy: user
    compact:
      after: 24h
      remove: true
      iceberg: {warehouse: %q}
`, filepath.Join(dir, "data"), filepath.Join(dir, "warehouse")))
	queue := write("queue.yaml", fmt.Sprintf(`
storage: {dir: %q}
tables:
  - name: plain
    hashBy: user
  - name: landing
    sources:
      - s3: {bucket: b, queue: "http://127.0.0.1:1/123456789012/objects"}
`, filepath.Join(dir, "data2")))
	grpcListen := write("grpc.yaml", fmt.Sprintf(`
storage: {dir: %q}
listen: {http: "127.0.0.1:0", grpc: "127.0.0.1:0"}
tables:
  - name: plain
    hashBy: user
`, filepath.Join(dir, "data3")))
	write("upper.so", "not opened: the lean binary cannot open plugins")
	plugin := write("plugin.yaml", "computed:\n  - name: up\n    type: string\n    func: upper.so\n    funcname: Upper\n")
	plain := write("plain.yaml", "computed:\n  - name: two\n    type: int64\n    func: \"function main(row) return 2 end\"\n")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--check", "--config", iceberg}, `table "events": compact.iceberg: this binary is built without the cold tier`},
		{[]string{"query", "--config", iceberg, "--table", "plain"}, `table "events": compact.iceberg: this binary is built without the cold tier`},
		{[]string{"validate", "--config", plugin}, "this binary cannot load Go plugins"},
		{[]string{"serve", "--check", "--config", queue}, `table "landing": sources[0] s3: queue http://127.0.0.1:1/123456789012/objects: this binary is built without SQS`},
		{[]string{"serve", "--check", "--config", grpcListen}, "listen.grpc: this binary is built without the gRPC listener"},
		{[]string{"validate", "--config", grpcListen}, "listen.grpc: this binary is built without the gRPC listener"},
		{[]string{"serve", "--config", grpcListen}, "listen.grpc: this binary is built without the gRPC listener"},
	} {
		out, err := run(tc.args...)
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("sluice %s: %v, want exit status 1\n%s", strings.Join(tc.args, " "), err, out)
		}
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "go run ./cmd/sluice-full") {
			t.Errorf("sluice %s: output does not name %q and sluice-full:\n%s", strings.Join(tc.args, " "), tc.want, out)
		}
		if strings.Contains(out, `table "plain"`) {
			t.Errorf("sluice %s: blames the table without compact.iceberg:\n%s", strings.Join(tc.args, " "), out)
		}
	}
	if out, err := run("validate", "--config", plain); err != nil || strings.Contains(out, "sluice-full") {
		t.Errorf("sluice validate of a Lua column: %v\n%s", err, out)
	}
}
