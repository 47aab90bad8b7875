package cli

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(queryCmd())
}

func queryCmd() *cobra.Command {
	var configPath, data, tableName, from, to, format string
	var serverURL nodeURL
	var cf clientFlags
	var hash, columns, where []string
	var limit int
	var clusterWide, partial bool
	cmd := &cobra.Command{
		Use:   "query --table T [--from T0 --to T1] [--hash V]... [--columns a,b] [--where 'n>=5']...",
		Short: "Query a table (through a running server with --server, or straight from the store)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if tableName == "" {
				return errors.New("--table is required")
			}
			params := map[string][]string{"from": {from}, "to": {to}, "hash": hash, "columns": columns, "where": where, "format": {format}}
			req, err := server.ParseQueryURL(params)
			if err != nil {
				return err
			}
			req.Limit = limit
			req.Cluster, req.Partial = clusterWide, partial
			if clusterWide && serverURL == "" {
				return errors.New("--cluster asks a running node for the whole cluster: give its URL with --server")
			}
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			defer out.Flush()
			if serverURL != "" {
				c, err := cf.client(string(serverURL), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				_, err = c.Query(ctx, tableName, req, out)
				if pe := (*server.PartialError)(nil); errors.As(err, &pe) {
					// Asked for: a warning, not a failure.
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", err)
					return nil
				}
				return err
			}
			cfg, err := loadServerConfig(configPath, "", false, false)
			if err != nil {
				return err
			}
			s, err := server.New(ctx, cfg, server.Options{StorageDir: data, Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.Query(ctx, tableName, req, out, format, nil)
			return err
		},
	}
	cmd.Flags().StringVar(&tableName, "table", "", "table to query")
	cmd.Flags().Var(&serverURL, "server", "URL of a running server (https://host:port, or host:port for http://); empty = straight from the store")
	cf.register(cmd)
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (without --server)")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (without --server)")
	cmd.Flags().StringVar(&from, "from", "", "start of the time range (RFC 3339 or unix seconds), inclusive")
	cmd.Flags().StringVar(&to, "to", "", "end of the time range, exclusive")
	cmd.Flags().StringArrayVar(&hash, "hash", nil, "hashBy value(s) (repeat or comma-separate)")
	cmd.Flags().StringArrayVar(&columns, "columns", nil, "columns to output, in order (comma-separate or repeat); a path into a json column too: address.city, items[0].sku, \"a.b\".c")
	cmd.Flags().StringArrayVar(&where, "where", nil, "predicate: 'col OP value' (= != < <= > >=), 'col IN a,b', 'col IS NULL'")
	cmd.Flags().IntVar(&limit, "limit", 0, "maximum rows (0 = all)")
	cmd.Flags().StringVar(&format, "format", "ndjson", "ndjson, csv or arrow (an Arrow IPC stream: sluice-full, or --server on a node built as sluice-full)")
	cmd.Flags().BoolVar(&clusterWide, "cluster", false, "every node's rows (the node at --server asks the others; docs/cluster.md)")
	cmd.Flags().BoolVar(&partial, "partial", false, "with --cluster: answer without the nodes that fail, and name them on stderr")
	return cmd
}
