package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	logs "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/otlplog"
	"github.com/sluicedb/sluice/internal/grpcapi"
	"github.com/sluicedb/sluice/table"
)

// The gRPC listener (listen.grpc: Talaria's Ingress, OTLP logs) is
// server/grpclisten's, registered in internal/grpcapi by the binaries that
// link grpc-go (sluice-full); the server reaches it through grpcapi only.
// What its calls need of the server is here: grpcHost.

// checkGRPC is, for Check, listen.grpc when this binary was built without
// the gRPC listener.
func checkGRPC(cfg *config.Config) error {
	if cfg.Listen.GRPC == "" || grpcapi.Linked() {
		return nil
	}
	return fmt.Errorf("listen.grpc: %w", grpcapi.ErrNotLinked)
}

// serveGRPC serves gl on ln until stop is called, which lets the calls in
// flight end until ctx is done, then ends them (the HTTP listener's
// shutdown does the same with its requests).
func serveGRPC(gl grpcapi.Listener, ln net.Listener, wg *sync.WaitGroup, log *slog.Logger) (stop func(ctx context.Context)) {
	wg.Go(func() {
		if err := gl.Serve(ln); err != nil {
			log.Error("grpc listener stopped", "addr", ln.Addr().String(), "error", err)
		}
	})
	return gl.Stop
}

// listenGRPC opens listen.grpc and makes its listener with the API
// listener's TLS (loaded first); nil without one. Its address is held to
// the same exposure rule as the API's.
func (s *Server) listenGRPC() (net.Listener, grpcapi.Listener, error) {
	if s.cfg.Listen.GRPC == "" {
		return nil, nil, nil
	}
	gl, err := grpcapi.Open(grpcapi.Config{
		MaxMessageBytes: s.cfg.Limits.MaxBodyBytes,
		IdleTimeout:     s.cfg.Listen.IdleTimeout,
		TLS:             s.tls.config,
		IngressTable:    s.cfg.Ingress.Table,
		LogsTable:       s.cfg.OTLP.LogsTable,
		Logger:          s.log,
	}, grpcHost{s})
	if err != nil {
		return nil, nil, fmt.Errorf("listen.grpc: %w", err)
	}
	ln, err := net.Listen("tcp", s.cfg.Listen.GRPC)
	if err != nil {
		return nil, nil, fmt.Errorf("listen.grpc: %w", err)
	}
	if err := s.checkExposure(ln.Addr()); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen.grpc: %w", err)
	}
	return ln, gl, nil
}

// grpcHost is the server as the gRPC listener's calls see it
// (grpcapi.Host).
type grpcHost struct{ s *Server }

// Authorize authenticates and authorizes a call before its handler, as
// guard does HTTP requests: the bearer token of the authorization
// metadata or the verified client certificate of the connection, and the
// permission of HTTP ingest on the call's table. A member's signature is
// not taken here: members talk over HTTP only.
func (h grpcHost) Authorize(ctx context.Context, call grpcapi.Call) error {
	s := h.s
	if s.authn == nil {
		return nil
	}
	r := callRequest(ctx, call)
	p, err := s.authn.Authenticate(r)
	if err != nil {
		s.audit.refused(r, p, call.Method, call.Table, http.StatusUnauthorized, err.Error())
		if !errors.Is(err, auth.ErrNoCredentials) {
			return fmt.Errorf("%w: authentication failed: %w", grpcapi.ErrUnauthenticated, err)
		}
		return fmt.Errorf("%w: authentication required: send the metadata authorization: Bearer <token>, or a client certificate (docs/security.md)", grpcapi.ErrUnauthenticated)
	}
	if !p.Allowed(ingestRows.perm, call.Table) {
		s.audit.refused(r, p, call.Method, call.Table, http.StatusForbidden, fmt.Sprintf("missing permission %s on table %q", ingestRows.perm, call.Table))
		return fmt.Errorf("%w: %s %q lacks the permission %s on table %q", grpcapi.ErrForbidden, p.Via, p.Name, ingestRows.perm, call.Table)
	}
	return nil
}

// callRequest is a call as the authenticator and the audit log see a
// request: its authorization metadata, its connection's TLS state and
// peer, and its method as the path.
func callRequest(ctx context.Context, call grpcapi.Call) *http.Request {
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: call.Method}, Header: http.Header{}, TLS: call.TLS}
	for _, v := range call.Authorization {
		r.Header.Add("Authorization", v)
	}
	if call.Peer != nil {
		r.RemoteAddr = call.Peer.String()
	}
	return r.WithContext(ctx)
}

// Ingest stores the rows of one gRPC message (grpcapi.Host).
func (h grpcHost) Ingest(ctx context.Context, name string, body []byte, format ingest.Format, origin string) (ingest.Result, error) {
	return h.s.ingestMessage(ctx, name, body, format, origin)
}

// Status is ingestStatus (grpcapi.Host).
func (h grpcHost) Status(err error) int { return ingestStatus(err) }

// ingestMessage stores the rows of one gRPC or OTLP message, in the
// format given, as one atomic batch: what POST /v1/tables/{table}/rows
// does with a body, behind the same queue, limits and dead letters.
func (s *Server) ingestMessage(ctx context.Context, name string, body []byte, format ingest.Format, origin string) (ingest.Result, error) {
	var res ingest.Result
	if !s.ready.Load() {
		return res, errShuttingDown
	}
	ts, ok := s.tables[name]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	if s.router.Routed(name) {
		return res, fmt.Errorf("%w: %s", errRouted, ingestRefused(name))
	}
	if ts.degraded != "" {
		return res, fmt.Errorf("%w: %w", errDegraded, ts.degradedError())
	}
	if !s.queue.TryEnter() {
		s.throttled.Add(1)
		return res, errQueueFull
	}
	defer s.queue.Leave()
	return s.Ingest(ctx, name, bytes.NewReader(body), IngestOptions{Format: format, MaxBytes: s.cfg.Limits.MaxBodyBytes, Origin: origin})
}

// What ingestMessage refuses before it decodes anything.
var (
	errShuttingDown = errors.New("server is shutting down")
	errRouted       = errors.New("table routed by key")
	errDegraded     = errors.New("table degraded")
	errQueueFull    = errors.New("ingest queue full, retry later")
)

// ingestStatus is the HTTP status of an error of ingestMessage, as POST
// /v1/tables/{table}/rows answers it: POST /v1/logs answers with it, and
// the gRPC listener's codes follow from it.
func ingestStatus(err error) int {
	var le *ingest.LineError
	var se *table.SchemaError
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, otlplog.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errShuttingDown), errors.Is(err, errDegraded):
		return http.StatusServiceUnavailable
	case errors.Is(err, errRouted):
		return http.StatusConflict
	case errors.Is(err, errQueueFull):
		return http.StatusTooManyRequests
	case errors.Is(err, table.ErrDiskFull):
		return http.StatusInsufficientStorage
	case errors.As(err, &le), errors.As(err, &se), errors.Is(err, ingest.ErrBadInput):
		return http.StatusBadRequest
	case errors.Is(err, ingest.ErrRejected):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrUnknownTable):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return http.StatusRequestTimeout
	}
	return http.StatusInternalServerError
}

// exportLogs stores req's records in table name.
func (s *Server) exportLogs(ctx context.Context, name string, req *logs.LogsData, origin string) (ingest.Result, error) {
	body, n, err := otlplog.AppendLines(nil, req, int(s.cfg.Limits.MaxBodyBytes))
	if err != nil {
		return ingest.Result{}, err
	}
	if n == 0 {
		return ingest.Result{}, nil
	}
	return s.ingestMessage(ctx, name, body, ingest.NDJSON, origin)
}

// handleOTLPLogs is OTLP/HTTP's POST /v1/logs in its binary protobuf
// encoding. OTLP/JSON is not taken: its ids are hex where protobuf's JSON
// mapping has base64, so it needs a decoder of its own.
func (s *Server) handleOTLPLogs(w http.ResponseWriter, r *http.Request) {
	name := s.cfg.OTLP.LogsTable
	if name == "" {
		writeError(w, http.StatusNotFound, "OTLP logs are off: configure otlp.logs_table (docs/grpc.md)")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: OTLP/HTTP logs are taken as application/x-protobuf", ct))
		return
	}
	body, release, err := s.readBody(w, r)
	defer release()
	if err != nil {
		s.writeBodyError(w, err)
		return
	}
	src := body
	if enc := r.Header.Get("Content-Encoding"); strings.EqualFold(enc, "gzip") {
		// OpenTelemetry collectors compress by default; the bound holds
		// after decompression too, as for a gzip body of rows.
		zr, err := gzip.NewReader(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Content-Encoding: gzip: "+err.Error())
			return
		}
		defer zr.Close()
		src = &limitedReader{r: zr, n: s.cfg.Limits.MaxBodyBytes}
	} else if enc != "" && !strings.EqualFold(enc, "identity") {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: OTLP/HTTP logs are taken plain or gzip", enc))
		return
	}
	msg, err := io.ReadAll(src)
	if errors.Is(err, ErrTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes once decompressed (limits.max_body_bytes)", s.cfg.Limits.MaxBodyBytes))
		return
	}
	if err != nil {
		s.writeBodyError(w, err)
		return
	}
	// ExportLogsServiceRequest is LogsData on the wire (package otlplog).
	var req logs.LogsData
	if err := proto.Unmarshal(msg, &req); err != nil {
		writeError(w, http.StatusBadRequest, "not an OTLP ExportLogsServiceRequest: "+err.Error())
		return
	}
	res, err := s.exportLogs(r.Context(), name, &req, requestOrigin(w, r))
	if err != nil {
		s.writeLogsError(w, name, err)
		return
	}
	rejected, why := otlplog.PartialSuccess(res.Failed)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(otlplog.AppendResponse(nil, rejected, why))
}

// writeLogsError answers a failed POST /v1/logs with the status POST
// /v1/tables/{table}/rows gives the same error (OTLP/HTTP clients retry
// 429, 502, 503 and 504 only).
func (s *Server) writeLogsError(w http.ResponseWriter, name string, err error) {
	code := ingestStatus(err)
	switch code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	case http.StatusInsufficientStorage:
		code = diskFullStatus(w)
	case http.StatusInternalServerError:
		s.log.Error("ingest failed", "table", name, "error", err)
	}
	writeError(w, code, err.Error())
}
