// Package freeport picks TCP ports on 127.0.0.1 for the real servers the
// tests and benchmarks start (Redis, Kafka, NATS, PostgreSQL, versitygw,
// Iceberg's REST catalog, Trino), which take a port number rather than a
// listener.
package freeport

import (
	"fmt"
	"net"
)

// Port returns a TCP port free on 127.0.0.1 at the time of the call.
// Another process may take it before the server binds it: callers that
// can tell retry with a new one.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
