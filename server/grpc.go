package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	// gzip is what OpenTelemetry collectors send by default.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	logs "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/otlplog"
	"github.com/sluicedb/sluice/ingest/talaria"
	"github.com/sluicedb/sluice/table"
)

// TableMetadata is the gRPC metadata key that names the table of a call to
// Talaria's Ingress service. Talaria's own requests carry no table (a
// Talaria node had one), so a call without it goes to ingress.table.
const TableMetadata = "x-sluice-table"

// The gRPC trailers of an ingest: what happened to the rows, since neither
// Talaria's nor OTLP's answer has room for it.
const (
	trailerAccepted    = "x-sluice-accepted"
	trailerFailed      = "x-sluice-failed"
	trailerDeadLetters = "x-sluice-dead-letters"
	trailerRequestID   = "x-sluice-request-id"
)

// newGRPCServer is the server of listen.grpc: Talaria's Ingress and OTLP's
// LogsService, behind grpcGuard, with the API listener's TLS. A message
// larger than limits.max_body_bytes is refused by gRPC before it is read
// whole (ResourceExhausted), as an HTTP body is.
func (s *Server) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(min(s.cfg.Limits.MaxBodyBytes, int64(^uint32(0)>>1)))),
		grpc.UnaryInterceptor(s.grpcGuard),
		// A connection without calls for listen.idle_timeout is closed, as
		// an idle HTTP keep-alive connection is: idle clients do not keep
		// file descriptors.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.Listen.IdleTimeout}),
	}
	if s.tls.config != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls.config)))
	}
	gs := grpc.NewServer(opts...)
	talaria.RegisterIngressServer(gs, ingressService{s})
	otlplog.RegisterLogsServer(gs, logsService{s})
	return gs
}

// serveGRPC serves listen.grpc on ln until stop is called, which lets the
// calls in flight end until ctx is done, then ends them (the HTTP
// listener's shutdown does the same with its requests).
func (s *Server) serveGRPC(ln net.Listener, wg *sync.WaitGroup) (stop func(ctx context.Context)) {
	gs := s.newGRPCServer()
	wg.Go(func() {
		if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("grpc listener stopped", "addr", ln.Addr().String(), "error", err)
		}
	})
	return func(ctx context.Context) {
		done := make(chan struct{})
		go func() {
			gs.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.log.Error("shutdown: gRPC calls did not finish in time")
			gs.Stop()
			<-done
		}
	}
}

// listenGRPC opens listen.grpc; nil without one. Its address is held to
// the same exposure rule as the API's.
func (s *Server) listenGRPC() (net.Listener, error) {
	if s.cfg.Listen.GRPC == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen.GRPC)
	if err != nil {
		return nil, fmt.Errorf("listen.grpc: %w", err)
	}
	if err := s.checkExposure(ln.Addr()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen.grpc: %w", err)
	}
	return ln, nil
}

// grpcTableKey is a call's context key of the table it was authorized on.
type grpcTableKey struct{}

// callTable is the table a call is about: x-sluice-table or ingress.table
// for Talaria's Ingress, otlp.logs_table for OTLP.
func (s *Server) callTable(ctx context.Context, method string) (string, error) {
	switch method {
	case talaria.IngestMethod:
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(TableMetadata)) > 0 {
			return md.Get(TableMetadata)[0], nil
		}
		if s.cfg.Ingress.Table == "" {
			return "", status.Errorf(codes.InvalidArgument, "no table: send the metadata %s, or configure ingress.table (docs/grpc.md)", TableMetadata)
		}
		return s.cfg.Ingress.Table, nil
	case otlplog.ExportMethod:
		if s.cfg.OTLP.LogsTable == "" {
			return "", status.Error(codes.Unimplemented, "OTLP logs are off: configure otlp.logs_table (docs/grpc.md)")
		}
		return s.cfg.OTLP.LogsTable, nil
	}
	return "", status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// grpcGuard authenticates and authorizes every call before its handler,
// as guard does HTTP requests: the bearer token of the authorization
// metadata or the verified client certificate of the connection, and the
// permission of HTTP ingest on the call's table. A member's signature is
// not taken here: members talk over HTTP only.
func (s *Server) grpcGuard(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	name, err := s.callTable(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if s.authn != nil {
		r := grpcRequest(ctx, info.FullMethod)
		p, err := s.authn.Authenticate(r)
		if err != nil {
			s.audit.refused(r, p, info.FullMethod, name, http.StatusUnauthorized, err.Error())
			msg := "authentication required: send the metadata authorization: Bearer <token>, or a client certificate (docs/security.md)"
			if !errors.Is(err, auth.ErrNoCredentials) {
				msg = "authentication failed: " + err.Error()
			}
			return nil, status.Error(codes.Unauthenticated, msg)
		}
		if !p.Allowed(ingestRows.perm, name) {
			s.audit.refused(r, p, info.FullMethod, name, http.StatusForbidden, fmt.Sprintf("missing permission %s on table %q", ingestRows.perm, name))
			return nil, status.Errorf(codes.PermissionDenied, "forbidden: %s %q lacks the permission %s on table %q", p.Via, p.Name, ingestRows.perm, name)
		}
	}
	return handler(context.WithValue(ctx, grpcTableKey{}, name), req)
}

// grpcRequest is a call as the authenticator and the audit log see a
// request: its authorization metadata, its connection's TLS state and
// peer, and its method as the path.
func grpcRequest(ctx context.Context, method string) *http.Request {
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: method}, Header: http.Header{}}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			r.Header.Add("Authorization", v)
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			r.RemoteAddr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			r.TLS = &ti.State
		}
	}
	return r.WithContext(ctx)
}

// ingestMessage stores the rows of one gRPC or OTLP message, in the
// format given, as one atomic batch: what POST /v1/tables/{table}/rows
// does with a body, behind the same queue, limits and dead letters. The
// answer is a gRPC status error.
func (s *Server) ingestMessage(ctx context.Context, name string, body []byte, format ingest.Format, origin string) (ingest.Result, error) {
	var res ingest.Result
	if !s.ready.Load() {
		return res, errShuttingDown
	}
	ts, ok := s.tables[name]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	if s.router.routed(name) {
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

// grpcStatus is the gRPC status of an ingest error, the codes matching
// the HTTP statuses of POST /v1/tables/{table}/rows.
func (s *Server) grpcStatus(name string, err error) error {
	var le *ingest.LineError
	var se *table.SchemaError
	var ce *compute.Error
	code := codes.Internal
	switch {
	case tooLarge(err):
		return status.Errorf(codes.ResourceExhausted, "rows larger than %d bytes (limits.max_body_bytes): %v", s.cfg.Limits.MaxBodyBytes, err)
	case errors.Is(err, errShuttingDown), errors.Is(err, errDegraded):
		code = codes.Unavailable
	case errors.Is(err, errRouted):
		code = codes.FailedPrecondition
	case errors.Is(err, errQueueFull), errors.Is(err, table.ErrDiskFull):
		code = codes.ResourceExhausted
	case errors.As(err, &le), errors.As(err, &se), errors.Is(err, ingest.ErrBadInput), errors.Is(err, talaria.ErrBadBatch):
		code = codes.InvalidArgument
	case errors.Is(err, ingest.ErrRejected) && errors.As(err, &ce):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrUnknownTable):
		code = codes.NotFound
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	if code == codes.Internal {
		s.log.Error("ingest failed", "table", name, "error", err)
	}
	return status.Error(code, err.Error())
}

// callOrigin names a call in its dead letters ("grpc request=<id>") and
// sends the id back in a trailer, so that a client can find them.
func callOrigin(ctx context.Context, kind string) string {
	var b [12]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	_ = grpc.SetTrailer(ctx, metadata.Pairs(trailerRequestID, id))
	return kind + " request=" + id
}

// setResultTrailer tells the client what happened to the rows.
func setResultTrailer(ctx context.Context, res ingest.Result) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(
		trailerAccepted, strconv.Itoa(res.Accepted),
		trailerFailed, strconv.Itoa(res.Failed),
		trailerDeadLetters, strconv.Itoa(len(res.DeadLetters)),
	))
}

// ingressService serves Talaria's Ingress.
type ingressService struct{ s *Server }

// Ingest stores a batch (its dictionary decoded into JSON lines), CSV or
// Parquet bytes. ORC has no decoder in sluice, and a URL is refused:
// sluice fetches no address a client names (the server would reach what
// the client cannot).
func (g ingressService) Ingest(ctx context.Context, req *talaria.IngestRequest) (*talaria.IngestResponse, error) {
	name, _ := ctx.Value(grpcTableKey{}).(string)
	s := g.s
	var body []byte
	var format ingest.Format
	switch d := req.GetData().(type) {
	case *talaria.IngestRequest_Batch:
		var err error
		body, err = talaria.AppendLines(nil, d.Batch, int(s.cfg.Limits.MaxBodyBytes))
		if err != nil {
			return nil, s.grpcStatus(name, err)
		}
		format = ingest.NDJSON
	case *talaria.IngestRequest_Csv:
		body, format = d.Csv, ingest.CSV
	case *talaria.IngestRequest_Parquet:
		body, format = d.Parquet, ingest.Parquet
	case *talaria.IngestRequest_Orc:
		return nil, status.Error(codes.Unimplemented, "ORC is not supported: send the rows as a batch, CSV or Parquet")
	case *talaria.IngestRequest_Url:
		return nil, status.Error(codes.Unimplemented, "ingest from a URL is not supported: sluice fetches no address a client names; send the file's bytes (csv or parquet)")
	default:
		return nil, status.Error(codes.InvalidArgument, "empty request: set batch, csv or parquet")
	}
	res, err := s.ingestMessage(ctx, name, body, format, callOrigin(ctx, "grpc"))
	setResultTrailer(ctx, res)
	if err != nil {
		return nil, s.grpcStatus(name, err)
	}
	return &talaria.IngestResponse{}, nil
}

// logsService serves OTLP's LogsService.
type logsService struct{ s *Server }

// Export stores a row per log record in otlp.logs_table. Records the
// table's policy routed to the dead letters are reported as rejected (the
// rest are stored), as OTLP's partial success asks.
func (l logsService) Export(ctx context.Context, req *logs.LogsData) (*emptypb.Empty, error) {
	name, _ := ctx.Value(grpcTableKey{}).(string)
	res, err := l.s.exportLogs(ctx, name, req, callOrigin(ctx, "otlp"))
	setResultTrailer(ctx, res)
	if err != nil {
		return nil, l.s.grpcStatus(name, err)
	}
	return otlplog.Response(rejectedLogs(res)), nil
}

func tooLarge(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, talaria.ErrTooLarge) || errors.Is(err, otlplog.ErrTooLarge)
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

// rejectedLogs is the partial success of an export that stored res: the
// records not stored and why, or nothing when every one was. Failed
// counts the dead letters already, with the bad lines skipped.
func rejectedLogs(res ingest.Result) (int64, string) {
	if res.Failed == 0 {
		return 0, ""
	}
	return int64(res.Failed), fmt.Sprintf("%d log records were not stored: see the table's dead letters", res.Failed)
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
	rejected, why := rejectedLogs(res)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(otlplog.AppendResponse(nil, rejected, why))
}

// writeLogsError answers a failed POST /v1/logs with the status POST
// /v1/tables/{table}/rows gives the same error (OTLP/HTTP clients retry
// 429, 502, 503 and 504 only).
func (s *Server) writeLogsError(w http.ResponseWriter, name string, err error) {
	var le *ingest.LineError
	var se *table.SchemaError
	code := http.StatusInternalServerError
	switch {
	case tooLarge(err):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, errShuttingDown), errors.Is(err, errDegraded):
		code = http.StatusServiceUnavailable
	case errors.Is(err, errRouted):
		code = http.StatusConflict
	case errors.Is(err, errQueueFull):
		w.Header().Set("Retry-After", "1")
		code = http.StatusTooManyRequests
	case errors.Is(err, table.ErrDiskFull):
		code = diskFullStatus(w)
	case errors.As(err, &le), errors.As(err, &se), errors.Is(err, ingest.ErrBadInput):
		code = http.StatusBadRequest
	case errors.Is(err, ingest.ErrRejected):
		code = http.StatusUnprocessableEntity
	case errors.Is(err, ErrUnknownTable):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		code = http.StatusRequestTimeout
	}
	if code == http.StatusInternalServerError {
		s.log.Error("ingest failed", "table", name, "error", err)
	}
	writeError(w, code, err.Error())
}
