package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Cluster says how a node finds the other nodes of its cluster, for
// queries over the whole cluster (docs/cluster.md). A node without it
// answers only for itself.
type Cluster struct {
	// Members are the nodes' base URLs (http://host:port), this node's
	// included.
	Members []string `yaml:"members"`
	// DNS is host:port of a name that resolves to every node (a Kubernetes
	// headless service); it is resolved at each cluster query.
	DNS string `yaml:"dns"`
	// Scheme of the URLs made from DNS: http (default) or https.
	Scheme string `yaml:"scheme"`
	// NodeTimeout bounds the wait for each node's answer to start and every
	// wait for more of it. Zero means package cluster's DefaultNodeTimeout
	// (10s): the one default, which a zero Fanout takes too.
	NodeTimeout time.Duration `yaml:"node_timeout"`
	// SecretFile holds the secret every member signs its requests to the
	// others with (relative to the config's directory); without it the
	// secret is the environment variable SLUICE_CLUSTER_SECRET. With auth
	// on, a cluster needs one (docs/security.md).
	SecretFile string `yaml:"secret_file"`
	// TLS is how this node verifies the other members it asks over
	// https:// (their CA, a server name) and the client certificate it
	// shows them when their listeners ask for one.
	TLS *ClientTLS `yaml:"tls"`
	// ReaderTimeout bounds how long a node that holds its cold tier for a
	// cluster query (no commit meanwhile) waits for its reader to make
	// progress: a member for its coordinator, the coordinator for its
	// client. Past it the query fails and the holds end. Default 30s.
	ReaderTimeout time.Duration `yaml:"reader_timeout"`
}

// SecretEnv is the environment variable of the cluster secret when
// cluster.secret_file is not set.
const SecretEnv = "SLUICE_CLUSTER_SECRET"

// DefaultReaderTimeout is cluster.reader_timeout's default: well above a
// node timeout (a coordinator waits that long for its members and its own
// hold before it reads), well below the query timeout.
const DefaultReaderTimeout = 30 * time.Second

// Enabled reports whether the config names a way to find the nodes.
func (c Cluster) Enabled() bool { return len(c.Members) > 0 || c.DNS != "" }

func (c Cluster) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Members) > 0 && c.DNS != "" {
		add("cluster: members and dns are both set; use one")
	}
	for i, m := range c.Members {
		u, err := url.Parse(m)
		switch {
		case err != nil:
			add("cluster.members[%d] %q: %v", i, m, err)
		case u.Scheme != "http" && u.Scheme != "https":
			add("cluster.members[%d] %q: want http://host:port or https://host:port", i, m)
		case u.Host == "":
			add("cluster.members[%d] %q: no host", i, m)
		case u.Path != "" && u.Path != "/":
			add("cluster.members[%d] %q: a node URL has no path", i, m)
		}
	}
	if c.DNS != "" {
		host, port, err := net.SplitHostPort(c.DNS)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
			add("cluster.dns %q: want host:port", c.DNS)
		}
	}
	if c.Scheme != "" && c.Scheme != "http" && c.Scheme != "https" {
		add("cluster.scheme %q: want http or https", c.Scheme)
	}
	if c.NodeTimeout < 0 {
		add("cluster.node_timeout: negative (%v)", c.NodeTimeout)
	}
	if c.ReaderTimeout < 0 {
		add("cluster.reader_timeout: negative (%v)", c.ReaderTimeout)
	}
	return append(errs, c.TLS.validate("cluster.tls")...)
}
