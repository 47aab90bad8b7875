package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPort: the port is a real one that can be listened on afterwards.
func TestPort(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("port %d", p)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", p, err)
	}
	l.Close()
}
