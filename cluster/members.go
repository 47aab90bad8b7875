// Package cluster finds the nodes of a sluice cluster and coordinates a
// cluster query between them (docs/cluster.md): one request to every node
// at once (Fanout), the coordinator's side of a query with its members
// (Query: the request bodies with the members' shares of source offsets,
// heartbeats and turns, the merge of their answers in turn), the member's
// side of that body (ReadMemberBody) and the bounds on a reader that makes
// no progress (WatchStall, ReaderTurn, DeadlineWriter), the source offsets
// each node answers for (Offsets, Assign), and each node's view of the
// others' key holdings (Views). It knows nothing of tables or formats: the
// server reads its own store, encodes rows and copies a member's answer
// into its own; key routing is cluster/keyroute's, the read leases'
// bookkeeping cluster/leases'.
//
// Nodes are found through what users already deploy: a static list of
// URLs in the config, or a DNS name that resolves to every node (a
// Kubernetes headless service resolves to one address per ready pod).
// There is no membership protocol of our own.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Members lists the base URLs (scheme://host:port) of a cluster's nodes.
type Members interface {
	Members(ctx context.Context) ([]string, error)
}

// Static is a fixed list of node URLs.
type Static []string

// Members returns the list, with trailing slashes trimmed.
func (s Static) Members(context.Context) ([]string, error) {
	out := make([]string, len(s))
	for i, u := range s {
		out[i] = strings.TrimRight(u, "/")
	}
	return out, nil
}

// DNS resolves Host to every address it has, at each call (a headless
// service's records follow the pods), and makes one URL per address with
// Port and Scheme ("http" when empty).
type DNS struct {
	Host     string
	Port     int
	Scheme   string
	Resolver *net.Resolver // nil: net.DefaultResolver
}

// ParseDNS reads "host:port" (what a config's cluster.dns holds).
func ParseDNS(hostPort, scheme string) (DNS, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return DNS{}, fmt.Errorf("cluster: dns %q: want host:port: %w", hostPort, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return DNS{}, fmt.Errorf("cluster: dns %q: bad port %q", hostPort, port)
	}
	if host == "" {
		return DNS{}, fmt.Errorf("cluster: dns %q: no host name", hostPort)
	}
	return DNS{Host: host, Port: p, Scheme: scheme}, nil
}

// ErrNoMembers is returned when discovery finds no node at all.
var ErrNoMembers = errors.New("cluster: no members found")

// Members resolves the name. An empty answer is ErrNoMembers: a query that
// silently covered no node would look like an empty table.
func (d DNS) Members(ctx context.Context) ([]string, error) {
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupHost(ctx, d.Host)
	if err != nil {
		return nil, fmt.Errorf("cluster: resolving %s: %w", d.Host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s resolves to no address", ErrNoMembers, d.Host)
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	scheme := d.Scheme
	if scheme == "" {
		scheme = "http"
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = (&url.URL{Scheme: scheme, Host: net.JoinHostPort(a, strconv.Itoa(d.Port))}).String()
	}
	return out, nil
}
