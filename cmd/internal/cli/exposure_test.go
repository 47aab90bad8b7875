package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/server"
)

// TestCheckReportsExposure: `sluice validate` and `serve --check` refuse a
// config that `serve` would refuse to start with: a listener beyond
// loopback without auth and without listen.allow_unauthenticated, with
// serve's message. Loopback, auth, or the explicit allowance pass.
func TestCheckReportsExposure(t *testing.T) {
	const table = `
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
`
	const tokens = `
auth:
  tokens:
    - {name: loader, hash: "sha256:edb0b9186e6783415e19a7dc87edbff6aa90af5679bcf72b70a0fd3731067e10", roles: ["ingest:events"]}
`
	dir := t.TempDir()
	for _, c := range []struct {
		name, yaml string
		flags      []string // serve --check's only
		exposed    string   // the address the refusal names; "" when the config passes
	}{
		{name: "every interface", yaml: `listen: {http: "0.0.0.0:8080"}`, exposed: "0.0.0.0:8080"},
		{name: "no host", yaml: `listen: {http: ":8080"}`, exposed: ":8080"},
		{name: "ipv6 every interface", yaml: `listen: {http: "[::]:8080"}`, exposed: "[::]:8080"},
		{name: "loopback", yaml: `listen: {http: "127.0.0.1:8080"}`},
		{name: "ipv6 loopback", yaml: `listen: {http: "[::1]:8080"}`},
		{name: "localhost", yaml: `listen: {http: "localhost:8080"}`},
		{name: "default", yaml: ``},
		{name: "allowed", yaml: `listen: {http: "0.0.0.0:8080", allow_unauthenticated: true}`},
		{name: "auth", yaml: `listen: {http: "0.0.0.0:8080"}` + tokens},
		{name: "flag", yaml: `listen: {http: "127.0.0.1:8080"}`, flags: []string{"--listen", "0.0.0.0:9090"}, exposed: "0.0.0.0:9090"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(c.yaml+table), 0o644); err != nil {
				t.Fatal(err)
			}
			runs := [][]string{append([]string{"serve", "--check", "--config", path}, c.flags...)}
			if c.flags == nil {
				runs = append(runs, []string{"validate", "--config", path})
			}
			for _, args := range runs {
				cmd := map[string]func() *cobra.Command{"validate": validateCmd, "serve": serveCmd}[args[0]]()
				cmd.SetOut(&bytes.Buffer{})
				cmd.SetErr(&bytes.Buffer{})
				cmd.SetArgs(args[1:])
				err := cmd.Execute()
				switch {
				case c.exposed == "" && err != nil:
					t.Errorf("sluice %s: %v, want ok", strings.Join(args, " "), err)
				case c.exposed != "" && !errors.Is(err, server.ErrUnauthenticatedExposure):
					t.Errorf("sluice %s: %v, want the exposure refused", strings.Join(args, " "), err)
				case c.exposed != "":
					// serve's own message (server's TestAuthSecureByDefault).
					want := c.exposed + " is reachable from other hosts and the config has no auth: section; configure tokens (docs/security.md), listen on 127.0.0.1, or set listen.allow_unauthenticated: true"
					if !strings.Contains(err.Error(), want) {
						t.Errorf("sluice %s: %v\nwant the message %q", strings.Join(args, " "), err, want)
					}
				}
			}
		})
	}
}
