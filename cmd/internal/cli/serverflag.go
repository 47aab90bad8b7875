package cli

import (
	"fmt"
	"net/url"
	"strings"
)

// nodeURL is the value of a --server flag: a node's base URL. A bare
// host:port is taken as http://host:port, as curl takes it; without that,
// url.Parse reads "127.0.0.1:8080" as a scheme and a path and the request
// fails far from the flag ("first path segment in URL cannot contain
// colon"). What is not an http(s) URL with a host is refused when the flag
// is parsed, naming the flag.
type nodeURL string

func (s *nodeURL) String() string { return string(*s) }

// Type names the value in --help.
func (s *nodeURL) Type() string { return "URL" }

func (s *nodeURL) Set(v string) error {
	if v == "" {
		*s = ""
		return nil
	}
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("want a node's URL such as http://127.0.0.1:8080: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an http:// or https:// URL such as http://127.0.0.1:8080", v)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: no host: want a URL such as http://127.0.0.1:8080", v)
	}
	*s = nodeURL(strings.TrimSuffix(v, "/"))
	return nil
}
