package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest/talaria"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testcert"
	"github.com/sluicedb/sluice/internal/tlsfiles"
	// registers the gRPC listener (internal/grpcapi), as sluice-full's main does
	"github.com/sluicedb/sluice/server/grpclisten"
)

// grpcAddr is a free loopback address for listen.grpc.
func grpcAddr(t testing.TB) string {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// dialGRPC is a real gRPC client of addr (creds nil: plaintext).
func dialGRPC(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// callCtx is a bounded call context with the metadata pairs kv.
func callCtx(t testing.TB, kv ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// allRows queries every row of table (as token, none when empty).
func allRows(t *testing.T, s *testServer, table, token string) []map[string]any {
	t.Helper()
	code, out, _ := call(t, "GET", s.url+"/v1/tables/"+table+"/query?from=1970-01-01T00:00:00Z&to=2200-01-01T00:00:00Z", token, nil)
	if code != http.StatusOK {
		t.Fatalf("query %s: %d %s", table, code, out)
	}
	return lines(out)
}

// batch is a Talaria batch of the rows given, dictionary-encoded as
// Talaria's clients do: every column name and string value once.
func batch(rows ...map[string]any) *talaria.Batch {
	b := &talaria.Batch{Strings: map[uint32][]byte{}}
	ids := map[string]uint32{}
	intern := func(s string) uint32 {
		id, ok := ids[s]
		if !ok {
			id = uint32(len(ids) + 1)
			ids[s] = id
			b.Strings[id] = []byte(s)
		}
		return id
	}
	for _, r := range rows {
		ev := &talaria.Event{Value: map[uint32]*talaria.Value{}}
		for k, v := range r {
			var val talaria.Value
			switch x := v.(type) {
			case string:
				val.Value = &talaria.Value_String_{String_: intern(x)}
			case int32:
				val.Value = &talaria.Value_Int32{Int32: x}
			case int64:
				val.Value = &talaria.Value_Int64{Int64: x}
			case float64:
				val.Value = &talaria.Value_Float64{Float64: x}
			case bool:
				val.Value = &talaria.Value_Bool{Bool: x}
			case time.Time:
				val.Value = &talaria.Value_Time{Time: x.Unix()}
			case talariaJSON:
				val.Value = &talaria.Value_Json{Json: intern(string(x))}
			default:
				panic(fmt.Sprintf("batch: %T", v))
			}
			ev.Value[intern(k)] = &val
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

// talariaJSON is a value sent as Talaria's json type.
type talariaJSON string

const ingressConfig = `
listen: {http: "127.0.0.1:0", grpc: "%s"}
ingress: {table: events}
tables:
  - name: events
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: score, type: float64}
      - {name: ok, type: bool}
      - {name: small, type: int32}
      - {name: meta, type: json}
  - name: other
    sortBy: ts
`

// TestGRPCIngressBatchAndCSV: Talaria's Ingress, called by a gRPC client
// built from the proto, stores a dictionary-encoded batch and CSV bytes
// in ingress.table, and another table named by x-sluice-table; every
// value reads back through the query API.
func TestGRPCIngressBatchAndCSV(t *testing.T) {
	addr := grpcAddr(t)
	s := startServer(t, fmt.Sprintf(ingressConfig, addr), "")
	client := grpclisten.NewIngressClient(dialGRPC(t, addr, nil))

	ts := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	b := batch(
		map[string]any{"user": "alice", "ts": ts, "n": int64(1), "score": 1.5, "ok": true, "small": int32(7), "meta": talariaJSON("{\n  \"a\": [1, 2]\n}")},
		map[string]any{"user": "bob", "ts": ts.Add(time.Second), "n": int64(2)},
	)
	var trailer metadata.MD
	if _, err := client.Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: b}}, grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("Ingest batch: %v", err)
	}
	if got := trailer.Get(grpclisten.TrailerAccepted); len(got) != 1 || got[0] != "2" {
		t.Errorf("trailer %s = %v, want 2", grpclisten.TrailerAccepted, got)
	}
	csv := "user,ts,n\ncarol,2026-03-01T10:00:02Z,3\n"
	if _, err := client.Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte(csv)}}); err != nil {
		t.Fatalf("Ingest csv: %v", err)
	}
	rows := allRows(t, s, "events", "")
	if len(rows) != 3 {
		t.Fatalf("events: %d rows, want 3: %v", len(rows), rows)
	}
	by := map[string]map[string]any{}
	for _, r := range rows {
		by[r["user"].(string)] = r
	}
	a := by["alice"]
	if a["n"] != 1.0 || a["score"] != 1.5 || a["ok"] != true || a["small"] != 7.0 || !strings.HasPrefix(fmt.Sprint(a["ts"]), "2026-03-01T10:00:00") {
		t.Errorf("alice read back as %v", a)
	}
	if m := fmt.Sprint(a["meta"]); !strings.Contains(m, "[1 2]") && !strings.Contains(m, `[1,2]`) {
		t.Errorf("alice's json value read back as %v", a["meta"])
	}
	if by["bob"]["n"] != 2.0 || by["carol"]["n"] != 3.0 {
		t.Errorf("bob and carol read back as %v, %v", by["bob"], by["carol"])
	}

	// Another table by metadata; the default table gets nothing of it.
	ctx := callCtx(t, grpclisten.TableMetadata, "other")
	if _, err := client.Ingest(ctx, &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: batch(map[string]any{"ts": ts, "x": "y"})}}); err != nil {
		t.Fatalf("Ingest into other: %v", err)
	}
	if rows := allRows(t, s, "other", ""); len(rows) != 1 || rows[0]["x"] != "y" {
		t.Errorf("other: %v", rows)
	}
	if rows := allRows(t, s, "events", ""); len(rows) != 3 {
		t.Errorf("events after the call to other: %d rows", len(rows))
	}

	// What sluice does not take is refused with its reason.
	for _, c := range []struct {
		req  *talaria.IngestRequest
		code codes.Code
	}{
		{&talaria.IngestRequest{Data: &talaria.IngestRequest_Orc{Orc: []byte("ORC")}}, codes.Unimplemented},
		{&talaria.IngestRequest{Data: &talaria.IngestRequest_Url{Url: "http://169.254.169.254/latest"}}, codes.Unimplemented},
		{&talaria.IngestRequest{}, codes.InvalidArgument},
		{&talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: &talaria.Batch{Events: []*talaria.Event{{Value: map[uint32]*talaria.Value{9: {}}}}}}}, codes.InvalidArgument},
	} {
		if _, err := client.Ingest(callCtx(t), c.req); status.Code(err) != c.code {
			t.Errorf("Ingest %v: %v, want %v", c.req, err, c.code)
		}
	}
	if _, err := client.Ingest(callCtx(t, grpclisten.TableMetadata, "nope"), &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte(csv)}}); status.Code(err) != codes.NotFound {
		t.Errorf("Ingest into an unknown table: %v, want NotFound", err)
	}
}

// logsRequest is an OTLP export of one record for table checks.
func logsRequest(body string) *collogs.ExportLogsServiceRequest {
	return &collogs.ExportLogsServiceRequest{ResourceLogs: []*logs.ResourceLogs{{
		ScopeLogs: []*logs.ScopeLogs{{LogRecords: []*logs.LogRecord{{
			TimeUnixNano: uint64(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()),
			Body:         &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: body}},
		}}}},
	}}}
}

// TestGRPCAuth: as an attacker. With auth on, a gRPC call without
// credentials is Unauthenticated, a wrong token too; a token without
// ingest on the call's table (a reader; a loader of another table, by
// x-sluice-table or as the OTLP logs table) is PermissionDenied, as is
// POST /v1/logs (401, 403); nothing of them is stored. The loader's token
// stores, and so does a client certificate mapped to the loader over
// mTLS.
func TestGRPCAuth(t *testing.T) {
	dir := t.TempDir()
	files, err := testcert.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := grpcAddr(t)
	section, toks := authSection(t)
	auditor, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	section += fmt.Sprintf("    - {name: auditor, hash: %q, roles: [\"query:events\", \"query:other\"]}\n", hash)
	cfg := fmt.Sprintf(`
listen:
  http: "127.0.0.1:0"
  grpc: %q
  tls: {cert_file: %q, key_file: %q, client_ca_file: %q}
ingress: {table: events}
otlp: {logs_table: other}
%s  client_certs:
    - {name: loader-cert, cn: %q, roles: ["ingest:events"]}
tables:
  - name: events
    sortBy: ts
  - name: other
`, addr, files.ServerCertFile, files.ServerKeyFile, files.CAFile, section, "sluice test client")
	// The API is HTTPS: the test's HTTP calls trust the test CA.
	s := serveConfig(t, cfg, "")
	clientTLS, _, err := tlsfiles.ClientConfig(tlsfiles.ClientOptions{CAFile: files.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	old := http.DefaultTransport
	http.DefaultTransport = &http.Transport{TLSClientConfig: clientTLS}
	t.Cleanup(func() { http.DefaultTransport = old })
	s.url = strings.Replace(s.url, "http://", "https://", 1)
	waitReady(t, s.url)

	plain := dialGRPC(t, addr, credentials.NewTLS(clientTLS.Clone()))
	ingress := grpclisten.NewIngressClient(plain)
	otlp := collogs.NewLogsServiceClient(plain)
	req := &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte("ts,who\n2026-03-01T10:00:00Z,mallory\n")}}
	bearer := func(tok string, kv ...string) context.Context {
		return callCtx(t, append([]string{"authorization", "Bearer " + tok}, kv...)...)
	}
	for _, c := range []struct {
		what string
		ctx  context.Context
		code codes.Code
	}{
		{"no credentials", callCtx(t), codes.Unauthenticated},
		{"an unknown token", bearer("sluice_not-a-token"), codes.Unauthenticated},
		{"not a bearer token", callCtx(t, "authorization", "Basic bWFsbG9yeQ=="), codes.Unauthenticated},
		{"a reader", bearer(toks.reader), codes.PermissionDenied},
		{"the admin", bearer(toks.ops), codes.PermissionDenied},
		{"the loader of events, into other", bearer(toks.loader, grpclisten.TableMetadata, "other"), codes.PermissionDenied},
	} {
		if _, err := ingress.Ingest(c.ctx, req); status.Code(err) != c.code {
			t.Errorf("Ingest with %s: %v, want %v", c.what, err, c.code)
		}
	}
	for _, c := range []struct {
		what string
		ctx  context.Context
		code codes.Code
	}{
		{"no credentials", callCtx(t), codes.Unauthenticated},
		{"the loader of events (the logs table is other)", bearer(toks.loader), codes.PermissionDenied},
	} {
		if _, err := otlp.Export(c.ctx, logsRequest("mallory")); status.Code(err) != c.code {
			t.Errorf("Export with %s: %v, want %v", c.what, err, c.code)
		}
	}
	msg, err := proto.Marshal(logsRequest("mallory"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, token string
		code        int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"the loader of events", toks.loader, http.StatusForbidden},
	} {
		if code, body, _ := call(t, "POST", s.url+"/v1/logs", c.token, strings.NewReader(string(msg)), "Content-Type", "application/x-protobuf"); code != c.code {
			t.Errorf("POST /v1/logs with %s: %d %s, want %d", c.what, code, body, c.code)
		}
	}
	for _, table := range []string{"events", "other"} {
		if rows := allRows(t, s, table, auditor); len(rows) != 0 {
			t.Errorf("%s holds what refused calls sent: %v", table, rows)
		}
	}

	// The rightful clients: the loader's token, and its certificate.
	if _, err := ingress.Ingest(bearer(toks.loader), req); err != nil {
		t.Errorf("Ingest with the loader's token: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(files.ClientCertFile, files.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	mtls := clientTLS.Clone()
	mtls.Certificates = []tls.Certificate{cert}
	withCert := grpclisten.NewIngressClient(dialGRPC(t, addr, credentials.NewTLS(mtls)))
	if _, err := withCert.Ingest(callCtx(t), req); err != nil {
		t.Errorf("Ingest with the loader's client certificate: %v", err)
	}
	if _, err := withCert.Ingest(callCtx(t, grpclisten.TableMetadata, "other"), req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Ingest with the certificate into other: %v, want PermissionDenied", err)
	}
	if rows := allRows(t, s, "events", auditor); len(rows) != 2 {
		t.Errorf("events: %d rows, want the 2 rightful ones: %v", len(rows), rows)
	}
}

// TestGRPCLimitsAndDeadLetters: a message over limits.max_body_bytes is
// ResourceExhausted, and so is a small batch whose strings, referred to
// from many events, make rows over it; nothing of either is stored. A bad
// row goes to the dead letters with the call's request id as its origin.
func TestGRPCLimitsAndDeadLetters(t *testing.T) {
	addr := grpcAddr(t)
	s := startServer(t, fmt.Sprintf(`
listen: {http: "127.0.0.1:0", grpc: %q}
limits: {max_body_bytes: 4096}
ingress: {table: t}
tables:
  - name: t
    sortBy: ts
    on_bad_line: skip
    schema:
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
    computed:
      - {name: twice, type: int64, on_error: deadletter, func: "function main(row) return row.n * 2 end"}
`, addr), "")
	client := grpclisten.NewIngressClient(dialGRPC(t, addr, nil))
	big := "ts,n\n" + strings.Repeat("2026-03-01T10:00:00Z,1\n", 400)
	_, err := client.Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte(big)}})
	// gRPC's own refusal: the message is not taken whole into memory.
	if msg := status.Convert(err).Message(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "received message larger than max") || !strings.Contains(msg, "vs. 4096)") {
		t.Errorf("a %d-byte message: %v, want ResourceExhausted from the message size bound, naming it (4096)", len(big), err)
	}
	ts := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var events []map[string]any
	for range 100 {
		events = append(events, map[string]any{"ts": ts, "n": int64(1), "s": strings.Repeat("x", 200)})
	}
	b := batch(events...)
	if size := proto.Size(b); size > 4096 {
		t.Fatalf("the batch is %d bytes: the test means it to be under the limit", size)
	}
	_, err = client.Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: b}})
	// Refused while its lines are made, at the event that passes the
	// limit: the server never holds more than the limit of them.
	if msg := status.Convert(err).Message(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "max_body_bytes") || !strings.Contains(msg, "at event") {
		t.Errorf("a batch whose rows pass the limit: %v, want ResourceExhausted naming max_body_bytes and the event", err)
	}
	if rows := allRows(t, s, "t", ""); len(rows) != 0 {
		t.Fatalf("refused messages stored %d rows", len(rows))
	}

	var trailer metadata.MD
	_, err = client.Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: batch(
		map[string]any{"ts": ts, "n": int64(1)},
		map[string]any{"ts": ts, "n": "not a number"},
	)}}, grpc.Trailer(&trailer))
	if err != nil {
		t.Fatalf("Ingest with a bad row: %v", err)
	}
	if rows := allRows(t, s, "t", ""); len(rows) != 1 || rows[0]["twice"] != 2.0 {
		t.Errorf("t: %v, want the good row", rows)
	}
	id := trailer.Get(grpclisten.TrailerRequestID)
	if len(id) != 1 {
		t.Fatalf("no request id in the trailer: %v", trailer)
	}
	dl := allRows(t, s, "t_deadletter", "")
	if len(dl) != 1 || dl[0]["origin"] != "grpc request="+id[0] || !strings.Contains(fmt.Sprint(dl[0]["row"]), "not a number") {
		t.Errorf("dead letters: %v, want the bad row with origin grpc request=%s", dl, id[0])
	}
}

// TestGRPCDocConfig: docs/grpc.md's configuration serves as written (its
// addresses moved to free ports): a Talaria batch lands in ingress.table
// with its computed column, a bad row in its dead letters, and an OTLP
// export in otlp.logs_table.
func TestGRPCDocConfig(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "grpc.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/grpc.md has no yaml block")
	}
	addr := grpcAddr(t)
	yaml := strings.Replace(strings.Replace(block, "127.0.0.1:9090", addr, 1), "127.0.0.1:8080", "127.0.0.1:0", 1)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateOptions(cfg); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, yaml, "")
	cc := dialGRPC(t, addr, nil)
	ts := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if _, err := grpclisten.NewIngressClient(cc).Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: batch(
		map[string]any{"ts": ts, "user": "alice", "amount": 1.25},
		map[string]any{"ts": "not a time", "user": "bob"},
	)}}); err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if rows := allRows(t, s, "events", ""); len(rows) != 1 || rows[0]["amount_cents"] != 125.0 {
		t.Errorf("events: %v", rows)
	}
	if dl := allRows(t, s, "events_deadletter", ""); len(dl) != 1 || !strings.HasPrefix(fmt.Sprint(dl[0]["origin"]), "grpc request=") {
		t.Errorf("events_deadletter: %v", dl)
	}
	// Now: the logs table keeps a week (ttl).
	req := logsRequest("hello")
	req.ResourceLogs[0].ScopeLogs[0].LogRecords[0].TimeUnixNano = uint64(time.Now().UnixNano())
	resp, err := collogs.NewLogsServiceClient(cc).Export(callCtx(t), req)
	if err != nil || resp.GetPartialSuccess() != nil {
		t.Fatalf("Export: %v, %v", resp, err)
	}
	if rows := allRows(t, s, "logs", ""); len(rows) != 1 || rows[0]["body"] != "hello" {
		t.Errorf("logs: %v", rows)
	}
}

// TestGRPCSecureByDefault: a gRPC address beyond loopback without auth
// stops the server (the HTTP one on loopback does not save it), and serve
// --check reports it before anything listens.
func TestGRPCSecureByDefault(t *testing.T) {
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("listen: {http: \"127.0.0.1:0\", grpc: \"0.0.0.0:%d\"}\ntables: [{name: events}]\n", port)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Check(ctx, cfg); !errors.Is(err, ErrUnauthenticatedExposure) {
		t.Errorf("serve --check: %v, want ErrUnauthenticatedExposure", err)
	}
	srv, err := New(ctx, cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ctx, ln); !errors.Is(err, ErrUnauthenticatedExposure) || !strings.Contains(err.Error(), "listen.grpc") {
		t.Errorf("Serve: %v, want ErrUnauthenticatedExposure naming listen.grpc", err)
	}
}

// TestGRPCIdleConnectionClosed: a client connection without calls for
// listen.idle_timeout is closed by the server.
func TestGRPCIdleConnectionClosed(t *testing.T) {
	addr := grpcAddr(t)
	startServer(t, fmt.Sprintf("listen: {http: \"127.0.0.1:0\", grpc: %q, idle_timeout: 300ms}\ningress: {table: events}\ntables: [{name: events}]\n", addr), "")
	cc := dialGRPC(t, addr, nil)
	ctx := callCtx(t)
	if _, err := grpclisten.NewIngressClient(cc).Ingest(ctx, &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte("a\n1\n")}}); err != nil {
		t.Fatal(err)
	}
	if cc.GetState() != connectivity.Ready {
		t.Fatalf("after a call: %v", cc.GetState())
	}
	// The server's GOAWAY takes the client out of Ready; ctx bounds the wait.
	if !cc.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatalf("the connection stayed %v past idle_timeout", cc.GetState())
	}
}

// TestGRPCEmptyMessages: a Talaria batch without events and an OTLP
// export without records are answered OK, with nothing stored and no
// dead letter.
func TestGRPCEmptyMessages(t *testing.T) {
	addr := grpcAddr(t)
	s := startServer(t, fmt.Sprintf(`
listen: {http: "127.0.0.1:0", grpc: %q}
ingress: {table: events}
otlp: {logs_table: logs}
tables:
  - name: events
    on_bad_line: skip
  - name: logs
    on_bad_line: skip
`, addr), "")
	cc := dialGRPC(t, addr, nil)
	for name, b := range map[string]*talaria.Batch{"no events": {}, "strings, no events": {Strings: map[uint32][]byte{1: []byte("user")}}} {
		var trailer metadata.MD
		if _, err := grpclisten.NewIngressClient(cc).Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: b}}, grpc.Trailer(&trailer)); err != nil {
			t.Errorf("a batch with %s: %v, want OK", name, err)
		}
		if got := trailer.Get(grpclisten.TrailerAccepted); len(got) != 1 || got[0] != "0" {
			t.Errorf("a batch with %s: trailer %s = %v, want 0", name, grpclisten.TrailerAccepted, got)
		}
	}
	for name, req := range map[string]*collogs.ExportLogsServiceRequest{
		"no resource logs":           {},
		"a resource without records": {ResourceLogs: []*logs.ResourceLogs{{ScopeLogs: []*logs.ScopeLogs{{}}}}},
	} {
		resp, err := collogs.NewLogsServiceClient(cc).Export(callCtx(t), req)
		if err != nil || resp.GetPartialSuccess().GetRejectedLogRecords() != 0 {
			t.Errorf("an export with %s: %v, %v, want OK with nothing rejected", name, resp, err)
		}
	}
	for _, table := range []string{"events", "logs", "events_deadletter", "logs_deadletter"} {
		if rows := allRows(t, s, table, ""); len(rows) != 0 {
			t.Errorf("%s: %v after empty messages, want nothing", table, rows)
		}
	}
}

// stalledCall opens a raw HTTP/2 connection to addr, announces a
// flow-control window of zero (the server may send no DATA: the answer's
// message is never taken), calls Talaria's Ingest with csv, and then
// reads nothing, as a client that never reads its answer does.
func stalledCall(t *testing.T, addr, csv string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", talaria.IngestMethod}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	msg, err := proto.Marshal(&talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte(csv)}})
	if err != nil {
		t.Fatal(err)
	}
	// A gRPC message: not compressed, its length, its bytes.
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	if err := fr.WriteData(1, true, append(frame, msg...)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestGRPCUnreadAnswersDoNotLeak: clients that call and never read their
// answer (a flow-control window of zero, nothing read from the socket)
// have their rows stored, and are closed by the server within twice
// listen.idle_timeout (its keepalive ping is never acknowledged); once
// they are gone the server holds no goroutine or stream for any of them.
func TestGRPCUnreadAnswersDoNotLeak(t *testing.T) {
	addr := grpcAddr(t)
	// The timeout leaves a stalled call's ingest time to finish under
	// load (-race, a busy machine) before its connection is cut, and the
	// queue takes every client's call at once (its default is 2 per CPU).
	s := startServer(t, fmt.Sprintf("listen: {http: \"127.0.0.1:0\", grpc: %q, idle_timeout: 2s}\nlimits: {max_inflight: 64}\ningress: {table: events}\ntables: [{name: events}]\n", addr), "")
	// One real call first, so that what the first connection starts once
	// (gRPC's and the store's lazily started goroutines) is in the baseline.
	real := dialGRPC(t, addr, nil)
	if _, err := grpclisten.NewIngressClient(real).Ingest(callCtx(t), &talaria.IngestRequest{Data: &talaria.IngestRequest_Csv{Csv: []byte("n\n0\n")}}); err != nil {
		t.Fatal(err)
	}
	waitGoroutines := func(what string, ok func(n int) bool) int {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if ok(n) {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d goroutines after 15s", what, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	real.Close()
	// The count once the server has seen the real client go.
	prev := runtime.NumGoroutine()
	base := waitGoroutines("after a client closed", func(n int) bool {
		settled := n == prev
		prev = n
		time.Sleep(200 * time.Millisecond)
		return settled
	})

	const clients = 20
	conns := make([]net.Conn, clients)
	start := time.Now()
	for i := range conns {
		conns[i] = stalledCall(t, addr, fmt.Sprintf("n\n%d\n", i+1))
	}
	// Every call is served: its rows are stored though its answer is not
	// taken.
	deadline := time.Now().Add(15 * time.Second)
	for len(allRows(t, s, "events", "")) != clients+1 {
		if time.Now().After(deadline) {
			t.Fatalf("events: %d rows, want %d", len(allRows(t, s, "events", "")), clients+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server closes each connection: reading it now ends (the ping and
	// GOAWAY the server wrote, then EOF or a reset) within the bound.
	for i, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("client %d: the server kept its connection open for %v", i, time.Since(start).Round(time.Millisecond))
		}
	}
	t.Logf("%d clients that read nothing closed by the server within %v (listen.idle_timeout 2s)", clients, time.Since(start).Round(time.Millisecond))
	// Nothing per client remains: the count returns to the baseline (a few
	// of the runtime's and the store's own may come and go).
	n := waitGoroutines("after the clients went away", func(n int) bool { return n <= base+3 })
	t.Logf("goroutines: %d before the clients, %d after", base, n)
}
