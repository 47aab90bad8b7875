// Package grpclisten is the server's gRPC listener (listen.grpc):
// Talaria's Ingress service and OTLP's LogsService, behind the same
// authentication, roles, limits and dead letters as HTTP ingest
// (docs/grpc.md). Its init registers it in internal/grpcapi, through
// which the server reaches it: a binary serves listen.grpc when its main
// imports this package (sluice-full does), and only then links grpc-go
// (docs/architecture.md).
package grpclisten

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	// gzip is what OpenTelemetry collectors send by default.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	logs "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/otlplog"
	"github.com/sluicedb/sluice/ingest/talaria"
	"github.com/sluicedb/sluice/internal/grpcapi"
)

func init() { grpcapi.Register(Open) }

// TableMetadata is the gRPC metadata key that names the table of a call to
// Talaria's Ingress service. Talaria's own requests carry no table (a
// Talaria node had one), so a call without it goes to ingress.table.
const TableMetadata = "x-sluice-table"

// The gRPC trailers of an ingest: what happened to the rows, since neither
// Talaria's nor OTLP's answer has room for it.
const (
	TrailerAccepted    = "x-sluice-accepted"
	TrailerFailed      = "x-sluice-failed"
	TrailerDeadLetters = "x-sluice-dead-letters"
	TrailerRequestID   = "x-sluice-request-id"
)

// listener is a grpc.Server with Talaria's Ingress and OTLP's
// LogsService.
type listener struct {
	cfg  grpcapi.Config
	host grpcapi.Host
	gs   *grpc.Server
}

// Open makes the listener of cfg, whose calls host serves
// (grpcapi.Opener). A message larger than cfg.MaxMessageBytes is refused
// by gRPC before it is read whole (ResourceExhausted), as an HTTP body is.
func Open(cfg grpcapi.Config, host grpcapi.Host) grpcapi.Listener {
	l := &listener{cfg: cfg, host: host}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(min(cfg.MaxMessageBytes, int64(^uint32(0)>>1)))),
		grpc.UnaryInterceptor(l.guard),
		// A connection without calls for listen.idle_timeout is closed, as
		// an idle HTTP keep-alive connection is: idle clients do not keep
		// file descriptors. One with a call whose client reads nothing (its
		// flow-control window shut, the answer never taken) is not idle:
		// after listen.idle_timeout without a frame from it the server
		// pings it, and closes it when the ping is not acknowledged within
		// as long again, so that such a client holds its connection (and
		// the answer queued on it) for at most twice the timeout.
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: cfg.IdleTimeout,
			Time:              cfg.IdleTimeout,
			Timeout:           cfg.IdleTimeout,
		}),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	l.gs = grpc.NewServer(opts...)
	registerIngressServer(l.gs, ingressService{l})
	registerLogsServer(l.gs, logsService{l})
	return l
}

// Serve serves ln until Stop.
func (l *listener) Serve(ln net.Listener) error {
	if err := l.gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop refuses new calls, lets those in flight end until ctx is done,
// then ends them.
func (l *listener) Stop(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		l.gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		l.cfg.Logger.Error("shutdown: gRPC calls did not finish in time")
		l.gs.Stop()
		<-done
	}
}

// tableKey is a call's context key of the table it was authorized on.
type tableKey struct{}

// callTable is the table a call is about: x-sluice-table or ingress.table
// for Talaria's Ingress, otlp.logs_table for OTLP.
func (l *listener) callTable(ctx context.Context, method string) (string, error) {
	switch method {
	case talaria.IngestMethod:
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(TableMetadata)) > 0 {
			return md.Get(TableMetadata)[0], nil
		}
		if l.cfg.IngressTable == "" {
			return "", status.Errorf(codes.InvalidArgument, "no table: send the metadata %s, or configure ingress.table (docs/grpc.md)", TableMetadata)
		}
		return l.cfg.IngressTable, nil
	case otlplog.ExportMethod:
		if l.cfg.LogsTable == "" {
			return "", status.Error(codes.Unimplemented, "OTLP logs are off: configure otlp.logs_table (docs/grpc.md)")
		}
		return l.cfg.LogsTable, nil
	}
	return "", status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// guard authenticates and authorizes every call before its handler
// (grpcapi.Host.Authorize), as the server does HTTP requests.
func (l *listener) guard(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	name, err := l.callTable(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	call := grpcapi.Call{Method: info.FullMethod, Table: name}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		call.Authorization = md.Get("authorization")
	}
	if p, ok := peer.FromContext(ctx); ok {
		call.Peer = p.Addr
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			call.TLS = &ti.State
		}
	}
	if err := l.host.Authorize(ctx, call); err != nil {
		switch {
		case errors.Is(err, grpcapi.ErrUnauthenticated):
			return nil, status.Error(codes.Unauthenticated, err.Error())
		case errors.Is(err, grpcapi.ErrForbidden):
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	return handler(context.WithValue(ctx, tableKey{}, name), req)
}

// ingest stores body through the host and answers with the rows' trailer.
func (l *listener) ingest(ctx context.Context, name string, body []byte, format ingest.Format, kind string) error {
	res, err := l.host.Ingest(ctx, name, body, format, callOrigin(ctx, kind))
	setResultTrailer(ctx, res)
	if err != nil {
		return l.status(name, err)
	}
	return nil
}

// grpcCodes are the gRPC codes of the HTTP statuses of POST
// /v1/tables/{table}/rows (grpcapi.Host.Status); any other is Internal.
var grpcCodes = map[int]codes.Code{
	http.StatusServiceUnavailable:    codes.Unavailable,
	http.StatusConflict:              codes.FailedPrecondition,
	http.StatusTooManyRequests:       codes.ResourceExhausted,
	http.StatusInsufficientStorage:   codes.ResourceExhausted,
	http.StatusBadRequest:            codes.InvalidArgument,
	http.StatusUnprocessableEntity:   codes.FailedPrecondition,
	http.StatusNotFound:              codes.NotFound,
	http.StatusRequestTimeout:        codes.DeadlineExceeded,
	http.StatusRequestEntityTooLarge: codes.ResourceExhausted,
}

// status is the gRPC status of an ingest error, its code that of the HTTP
// status POST /v1/tables/{table}/rows answers the same error with.
func (l *listener) status(name string, err error) error {
	if errors.Is(err, talaria.ErrTooLarge) || errors.Is(err, otlplog.ErrTooLarge) || l.host.Status(err) == http.StatusRequestEntityTooLarge {
		return status.Errorf(codes.ResourceExhausted, "rows larger than %d bytes (limits.max_body_bytes): %v", l.cfg.MaxMessageBytes, err)
	}
	if errors.Is(err, talaria.ErrBadBatch) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	code, ok := grpcCodes[l.host.Status(err)]
	if !ok {
		code = codes.Internal
		l.cfg.Logger.Error("ingest failed", "table", name, "error", err)
	}
	return status.Error(code, err.Error())
}

// callOrigin names a call in its dead letters ("grpc request=<id>") and
// sends the id back in a trailer, so that a client can find them.
func callOrigin(ctx context.Context, kind string) string {
	var b [12]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	_ = grpc.SetTrailer(ctx, metadata.Pairs(TrailerRequestID, id))
	return kind + " request=" + id
}

// setResultTrailer tells the client what happened to the rows.
func setResultTrailer(ctx context.Context, res ingest.Result) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(
		TrailerAccepted, strconv.Itoa(res.Accepted),
		TrailerFailed, strconv.Itoa(res.Failed),
		TrailerDeadLetters, strconv.Itoa(len(res.DeadLetters)),
	))
}

// ingressService serves Talaria's Ingress.
type ingressService struct{ l *listener }

// Ingest stores a batch (its dictionary decoded into JSON lines), CSV or
// Parquet bytes. ORC has no decoder in sluice, and a URL is refused:
// sluice fetches no address a client names (the server would reach what
// the client cannot).
func (g ingressService) Ingest(ctx context.Context, req *talaria.IngestRequest) (*talaria.IngestResponse, error) {
	name, _ := ctx.Value(tableKey{}).(string)
	var body []byte
	var format ingest.Format
	switch d := req.GetData().(type) {
	case *talaria.IngestRequest_Batch:
		var err error
		body, err = talaria.AppendLines(nil, d.Batch, int(g.l.cfg.MaxMessageBytes))
		if err != nil {
			return nil, g.l.status(name, err)
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
	if err := g.l.ingest(ctx, name, body, format, "grpc"); err != nil {
		return nil, err
	}
	return &talaria.IngestResponse{}, nil
}

// logsService serves OTLP's LogsService.
type logsService struct{ l *listener }

// Export stores a row per log record in otlp.logs_table. Records the
// table's policy routed to the dead letters are reported as rejected (the
// rest are stored), as OTLP's partial success asks.
func (o logsService) Export(ctx context.Context, req *logs.LogsData) (*emptypb.Empty, error) {
	name, _ := ctx.Value(tableKey{}).(string)
	body, n, err := otlplog.AppendLines(nil, req, int(o.l.cfg.MaxMessageBytes))
	if err != nil {
		return nil, o.l.status(name, err)
	}
	origin := callOrigin(ctx, "otlp")
	var res ingest.Result
	if n > 0 {
		res, err = o.l.host.Ingest(ctx, name, body, ingest.NDJSON, origin)
	}
	setResultTrailer(ctx, res)
	if err != nil {
		return nil, o.l.status(name, err)
	}
	return logsResponse(otlplog.PartialSuccess(res.Failed)), nil
}
