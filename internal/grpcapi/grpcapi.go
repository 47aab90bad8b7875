// Package grpcapi is the gRPC listener (listen.grpc) as the server sees
// it: what the server offers a call (Host), what the listener is opened
// with (Config), and the registration of the implementation.
//
// The server imports this package, never grpc-go: grpc-go links
// golang.org/x/net/trace, whose text/template and html/template make the
// linker keep every exported method of every type, 14 MB of the binary
// and 11 MB more resident memory at every start of every command
// (docs/perf/binaries.md). A binary that serves listen.grpc imports
// server/grpclisten, whose init registers it here (as coldtier registers
// the cold tier in coldapi); one that does not, the lean sluice, refuses
// listen.grpc with ErrNotLinked. See docs/architecture.md.
package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/ingest"
)

// ErrNotLinked: no gRPC listener is registered in this binary.
var ErrNotLinked = errors.New("this binary is built without the gRPC listener (listen.grpc)")

// The refusals of Host.Authorize, which the listener answers with
// Unauthenticated and PermissionDenied.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Call is one gRPC call as the server authorizes it.
type Call struct {
	// Method is the call's full method name ("/talaria.Ingress/Ingest"),
	// what the audit log shows as its path.
	Method string
	// Table is the table the call writes to.
	Table string
	// Authorization holds the values of the call's authorization
	// metadata ("Bearer <token>").
	Authorization []string
	// Peer is the client's address; nil when unknown.
	Peer net.Addr
	// TLS is the connection's state; nil without TLS.
	TLS *tls.ConnectionState
}

// Host is what the server does for the listener's calls.
type Host interface {
	// Authorize authenticates call (a bearer token or the connection's
	// client certificate) and checks the permission of HTTP ingest on
	// its table, auditing a refusal as HTTP's are. Its error wraps
	// ErrUnauthenticated or ErrForbidden and says what to send.
	Authorize(ctx context.Context, call Call) error
	// Ingest stores body, in format, in table as one atomic batch: what
	// POST /v1/tables/{table}/rows does with a body, behind the same
	// queue, limits and dead letters. origin names the call in its dead
	// letters.
	Ingest(ctx context.Context, table string, body []byte, format ingest.Format, origin string) (ingest.Result, error)
	// Status is the HTTP status POST /v1/tables/{table}/rows answers an
	// error of Ingest with: the listener's gRPC code follows from it, so
	// that both transports classify an error alike.
	Status(err error) int
}

// Config is what the listener is opened with, from the server's config.
type Config struct {
	// MaxMessageBytes bounds a message and the rows it decodes to
	// (limits.max_body_bytes).
	MaxMessageBytes int64
	// IdleTimeout closes a connection without calls (listen.idle_timeout).
	IdleTimeout time.Duration
	// TLS is the API listener's TLS; nil: plaintext.
	TLS *tls.Config
	// IngressTable takes Talaria's calls that name no table
	// (ingress.table); "" refuses them.
	IngressTable string
	// LogsTable takes OTLP log records (otlp.logs_table); "": OTLP is off.
	LogsTable string
	Logger    *slog.Logger
}

// Listener serves listen.grpc.
type Listener interface {
	// Serve serves ln until Stop; it returns nil once stopped.
	Serve(ln net.Listener) error
	// Stop refuses new calls and lets the calls in flight end until ctx
	// is done, then ends them.
	Stop(ctx context.Context)
}

// Opener makes the listener of a server.
type Opener func(cfg Config, host Host) Listener

var opener atomic.Pointer[Opener]

// Register makes open the gRPC listener of this process; grpclisten's init
// calls it.
func Register(open Opener) { opener.Store(&open) }

// Linked reports whether a gRPC listener is registered.
func Linked() bool { return opener.Load() != nil }

// Open makes a listener with the registered Opener, or fails with
// ErrNotLinked.
func Open(cfg Config, host Host) (Listener, error) {
	open := opener.Load()
	if open == nil {
		return nil, ErrNotLinked
	}
	return (*open)(cfg, host), nil
}
