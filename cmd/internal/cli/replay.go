package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(replayCmd())
}

func replayCmd() *cobra.Command {
	var configPath, data, tableName, since, until, reason string
	var serverURL nodeURL
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "replay --table T [--since T0] [--until T1] [--reason TEXT]",
		Short: "Ingest a table's dead letters into it again after a fix, each once, through a server or straight on the store",
		Long: `Replay takes the dead letters of a table (its <table>_deadletter table: with compact.iceberg, the Iceberg
table and the store's uncommitted rows) back into the table, each once: a dead letter replayed gets a record in
the dead-letter table, stored with its rows, and a replay run again (or after an interrupted one) leaves it out.
A dead letter that fails again stays one, with its new reason. See docs/streams.md, "Dead letters and replay".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if tableName == "" {
				return errors.New("--table is required")
			}
			var o server.ReplayOptions
			for _, b := range []struct {
				flag, v string
				at      *time.Time
			}{{"--since", since, &o.Since}, {"--until", until, &o.Until}} {
				if b.v == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339Nano, b.v)
				if err != nil {
					return fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-11-29T08:00:00Z", b.flag, b.v)
				}
				*b.at = t
			}
			o.Reason = reason
			var res server.ReplayResult
			var err error
			if serverURL != "" {
				client, cerr := cf.client(string(serverURL), cmd.ErrOrStderr())
				if cerr != nil {
					return cerr
				}
				res, err = client.Replay(ctx, tableName, o)
			} else {
				cfg, lerr := loadServerConfig(configPath, "", false, false)
				if lerr != nil {
					return lerr
				}
				s, serr := server.New(ctx, cfg, server.Options{StorageDir: data, Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
				if serr != nil {
					return serr
				}
				defer s.Close()
				res, err = s.Replay(ctx, tableName, o)
			}
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	cmd.Flags().StringVar(&tableName, "table", "", "table whose dead letters to replay")
	cmd.Flags().StringVar(&since, "since", "", "only dead letters from this time on (RFC 3339)")
	cmd.Flags().StringVar(&until, "until", "", "only dead letters before this time (RFC 3339)")
	cmd.Flags().StringVar(&reason, "reason", "", "only dead letters whose error or loader contains this text")
	cmd.Flags().Var(&serverURL, "server", "URL of a running server (https://host:port, or host:port for http://); empty = straight on the store (the server must not be running)")
	cf.register(cmd)
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (YAML), without --server")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (overrides storage.dir), without --server")
	return cmd
}
