package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/tlsfiles"
	"github.com/sluicedb/sluice/server"
)

// TokenEnv is the environment variable a client's token is read from when
// --token is not given (a flag's value is visible to every user of the
// machine in the process list; the environment is not).
const TokenEnv = "SLUICE_TOKEN"

// clientFlags are how a command that talks to a running server (--server)
// reaches it: TLS and the token.
type clientFlags struct {
	ca, cert, key, serverName, token string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.ca, "ca", "", "with an https:// --server: the CA file (PEM) that verifies the server (default: the system's roots)")
	cmd.Flags().StringVar(&f.cert, "cert", "", "with an https:// --server: a client certificate (PEM) for a server that asks for one; needs --cert-key")
	// Not --key: ingest's --key selects an RDB's keys.
	cmd.Flags().StringVar(&f.key, "cert-key", "", "the private key (PEM) of --cert")
	cmd.Flags().StringVar(&f.serverName, "server-name", "", "the name the server's certificate must carry (default: the host of --server)")
	cmd.Flags().StringVar(&f.token, "token", "", "token sent as 'Authorization: Bearer' (default: $"+TokenEnv+", which other users cannot read in the process list)")
}

// client is the server.Client of serverURL with the flags' TLS and token.
// A token about to cross the network in clear text is warned of on stderr.
func (f *clientFlags) client(serverURL string, stderr io.Writer) (*server.Client, error) {
	base, err := server.BaseURL(serverURL)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	c := &server.Client{URL: base, Token: f.token}
	if c.Token == "" {
		c.Token = os.Getenv(TokenEnv)
	}
	if strings.HasPrefix(base, "http://") && c.Token != "" && !loopbackURL(base) {
		// Not refused (a proxy in front may add TLS), but said.
		fmt.Fprintf(stderr, "warning: the token is sent in clear text to %s; use https://\n", base)
	}
	if f.ca == "" && f.cert == "" && f.key == "" && f.serverName == "" {
		return c, nil
	}
	if !strings.HasPrefix(base, "https://") {
		return nil, errors.New("--ca, --cert, --cert-key and --server-name are for an https:// --server")
	}
	tc, _, err := tlsfiles.ClientConfig(tlsfiles.ClientOptions{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, ServerName: f.serverName})
	if err != nil {
		return nil, err
	}
	c.TLS = tc
	return c, nil
}

// loopbackURL reports whether base's host is this machine's loopback.
func loopbackURL(base string) bool {
	host := strings.TrimPrefix(base, "http://")
	return strings.HasPrefix(host, "127.") || strings.HasPrefix(host, "localhost") || strings.HasPrefix(host, "[::1]")
}
