package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/auth"
)

func init() {
	rootCmd.AddCommand(authCmd())
}

func authCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Credentials for a server's auth: section (docs/security.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(tokenCmd())
	return cmd
}

func tokenCmd() *cobra.Command {
	var name string
	var roles []string
	cmd := &cobra.Command{
		Use:   "token --name NAME --role ROLE...",
		Short: "Make a token: print it once, and the entry (its hash) for auth.tokens or the tokens file",
		Long: `Make a random bearer token and print it, then the line to add under auth.tokens
(or in the tokens file). The server keeps only the token's SHA-256: the token
is shown this once. Roles: ingest:TABLE, query:TABLE (TABLE may be *), admin,
metrics; repeat --role or separate them with commas.`,
		Example: "  sluice auth token --name loader --role ingest:events\n  sluice auth token --name trino --role 'query:*'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name is required (the audit log names the token by it)")
			}
			if len(roles) == 0 {
				return errors.New("--role is required: ingest:TABLE, query:TABLE, admin or metrics")
			}
			if _, err := auth.ParseRoles(roles); err != nil {
				return err
			}
			token, hash, err := auth.NewToken()
			if err != nil {
				return err
			}
			quoted := make([]string, len(roles))
			for i, r := range roles {
				quoted[i] = strconv.Quote(r)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "# the token, shown this once (the server keeps only its hash); clients send Authorization: Bearer <token>")
			fmt.Fprintln(out, token)
			fmt.Fprintln(out, "# its entry under auth.tokens (or tokens: in the tokens file)")
			fmt.Fprintf(out, "- {name: %s, hash: %q, roles: [%s]}\n", strconv.Quote(name), hash, strings.Join(quoted, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the token's name (the audit log's)")
	cmd.Flags().StringSliceVar(&roles, "role", nil, "a role: ingest:TABLE, query:TABLE (* for every table), admin, metrics")
	return cmd
}
