package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/tlsfiles"
)

// listenerTLS is the API listener's TLS: the configuration handshakes get
// and the Reloader of its files. Both nil without listen.tls.
type listenerTLS struct {
	config *tls.Config
	certs  *tlsfiles.Reloader
	every  time.Duration
}

// loadTLS loads listen.tls's files (relative paths are relative to the
// config file's directory, as scripts are).
func loadTLS(cfg *config.Config) (listenerTLS, error) {
	t := cfg.Listen.TLS
	if !t.Enabled() {
		return listenerTLS{}, nil
	}
	path := func(f string) string {
		if f == "" || filepath.IsAbs(f) {
			return f
		}
		return filepath.Join(cfg.BaseDir, f)
	}
	auth := map[string]tlsfiles.ClientAuth{
		config.ClientAuthNone:          tlsfiles.NoClientCert,
		config.ClientAuthVerifyIfGiven: tlsfiles.VerifyIfGiven,
		config.ClientAuthRequire:       tlsfiles.RequireClientCert,
	}[t.ClientAuth]
	tc, certs, err := tlsfiles.ServerConfig(tlsfiles.ServerOptions{
		Files:      tlsfiles.Files{CertFile: path(t.CertFile), KeyFile: path(t.KeyFile), CAFile: path(t.ClientCAFile)},
		ClientAuth: auth,
	})
	if err != nil {
		return listenerTLS{}, fmt.Errorf("listen.tls: %w", err)
	}
	return listenerTLS{config: tc, certs: certs, every: t.ReloadInterval}, nil
}

// storeFiles is the file descriptors kept for everything but client
// connections: Pebble's table cache (1000 by default), its WAL and
// manifest, stream sources, the cold tier's connections.
const storeFiles = 1100

// staleNewConn is how long a connection may stay without its first request
// before, at the connection cap, it counts as idle: long enough for a TLS
// handshake over a slow link, short enough that connections opened and
// left silent do not lock real clients out for the whole header timeout.
const staleNewConn = time.Second

// connLimiter is a listener that keeps at most max connections open. At
// the cap, a new connection is made room for by closing the one idle the
// longest (waiting for its next request, or stale without its first);
// when every connection is busy with a request the new one is closed at
// once. It sits under TLS, so an evicted connection's socket closes
// without a close_notify that a client not reading could block.
type connLimiter struct {
	net.Listener
	max int
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	open int // REQUIRES mu
	// idle are the connections between requests, fresh those accepted
	// and not yet past their first request; each oldest first.
	// REQUIRES mu.
	idle, fresh list.List

	evicted, refused atomic.Int64
	lastWarn         atomic.Int64 // unix ns of the last warning logged
}

// trackedConn is a connection the limiter counts.
type trackedConn struct {
	net.Conn
	l *connLimiter

	// The fields below are guarded by l.mu.
	elem  *list.Element // in l.idle or l.fresh, nil when in neither
	since time.Time     // when it entered its list
	gone  bool          // no longer counted (closed or evicted)
}

func newConnLimiter(ln net.Listener, max int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, log: log, now: time.Now}
}

// Accept returns the next connection, closing an idle one or the new one
// when max are open.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		now := l.now()
		l.mu.Lock()
		if l.open >= l.max && !l.evictLocked(now) {
			l.mu.Unlock()
			l.refused.Add(1)
			c.Close()
			l.warn()
			continue
		}
		l.open++
		tc.since, tc.elem = now, l.fresh.PushBack(tc)
		l.mu.Unlock()
		return tc, nil
	}
}

// evictLocked closes the connection idle the longest, if there is one.
// REQUIRES l.mu.
func (l *connLimiter) evictLocked(now time.Time) bool {
	victim := l.idle.Front()
	if victim == nil {
		if f := l.fresh.Front(); f != nil && now.Sub(f.Value.(*trackedConn).since) >= staleNewConn {
			victim = f
		}
	}
	if victim == nil {
		return false
	}
	tc := victim.Value.(*trackedConn)
	l.releaseLocked(tc)
	// The socket, not the TLS connection: no close_notify to block on.
	tc.Conn.Close()
	l.evicted.Add(1)
	l.warn()
	return true
}

// releaseLocked stops counting tc. REQUIRES l.mu.
func (l *connLimiter) releaseLocked(tc *trackedConn) {
	if tc.gone {
		return
	}
	tc.gone = true
	l.unlistLocked(tc)
	l.open--
}

// unlistLocked takes tc out of the idle or fresh list. REQUIRES l.mu.
func (l *connLimiter) unlistLocked(tc *trackedConn) {
	if tc.elem == nil {
		return
	}
	// Remove is a no-op on the list an element is not in.
	l.idle.Remove(tc.elem)
	l.fresh.Remove(tc.elem)
	tc.elem = nil
}

// connState follows the HTTP server's view of each connection
// (http.Server.ConnState): only a connection between requests may be
// evicted.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.gone {
		return
	}
	switch state {
	case http.StateActive:
		l.unlistLocked(tc)
	case http.StateIdle:
		l.unlistLocked(tc)
		tc.since, tc.elem = l.now(), l.idle.PushBack(tc)
	case http.StateHijacked, http.StateClosed:
		l.releaseLocked(tc)
	}
}

// Close closes the connection and stops counting it.
func (tc *trackedConn) Close() error {
	tc.l.mu.Lock()
	tc.l.releaseLocked(tc)
	tc.l.mu.Unlock()
	return tc.Conn.Close()
}

// CloseWrite half-closes a TCP connection, which net/http does before it
// closes a connection whose request it refused (so the client reads the
// answer instead of a reset).
func (tc *trackedConn) CloseWrite() error {
	if cw, ok := tc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// warn logs that the cap is reached, at most once every 10 seconds, with
// the totals so far.
func (l *connLimiter) warn() {
	now := l.now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(10*time.Second) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("listen.max_connections reached: closing idle connections to make room, refusing new ones when none is idle",
		"max_connections", l.max, "evicted_total", l.evicted.Load(), "refused_total", l.refused.Load())
}

// serveListener wraps ln as listen: the connection cap, then TLS. The
// limiter's connState must be hs.ConnState.
func (s *Server) serveListener(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) (net.Listener, *connLimiter) {
	max := s.cfg.Listen.MaxConnections
	if limit := fdLimit(); limit > 0 && uint64(max)+storeFiles > limit {
		s.log.Warn("listen.max_connections leaves too few file descriptors for the store: raise the process's limit (ulimit -n, LimitNOFILE=) or lower max_connections",
			"max_connections", max, "open_files_limit", limit, "store_files", storeFiles)
	}
	limiter := newConnLimiter(ln, max, s.log)
	if s.tls.config == nil {
		return limiter, limiter
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.tls.certs.Watch(ctx, s.tls.every, s.log)
	}()
	return tls.NewListener(limiter, s.tls.config), limiter
}

// reloadTLS loads the listener's certificate files again now (SIGHUP),
// logging the outcome; nothing without TLS.
func (s *Server) reloadTLS() {
	if s.tls.certs != nil {
		s.tls.certs.ReloadAndLog(true, s.log)
	}
}
