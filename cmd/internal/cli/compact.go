package cli

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(compactCmd())
}

func compactCmd() *cobra.Command {
	var configPath, data, tableName string
	var serverURL nodeURL
	var cf clientFlags
	var orphans, maintain bool
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "compact --table T",
		Short: "Compact a table now (to its compact.dir or its Iceberg table), through a server or straight on the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if tableName == "" {
				return errors.New("--table is required")
			}
			if maintain && orphans {
				return errors.New("--maintain and --orphans: choose one")
			}
			var res any
			var err error
			if serverURL != "" {
				client, cerr := cf.client(string(serverURL), cmd.ErrOrStderr())
				if cerr != nil {
					return cerr
				}
				switch {
				case maintain:
					res, err = client.Maintain(ctx, tableName)
				case orphans:
					res, err = client.DeleteOrphans(ctx, tableName, olderThan)
				default:
					res, err = client.Compact(ctx, tableName)
				}
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
				switch {
				case maintain:
					res, err = s.MaintainNow(ctx, tableName)
				case orphans:
					res, err = s.DeleteOrphansNow(ctx, tableName, olderThan)
				default:
					res, err = s.CompactNow(ctx, tableName)
				}
			}
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	cmd.Flags().StringVar(&tableName, "table", "", "table to compact")
	cmd.Flags().Var(&serverURL, "server", "URL of a running server (https://host:port, or host:port for http://); empty = straight on the store (the server must not be running)")
	cf.register(cmd)
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (YAML), without --server")
	cmd.Flags().BoolVar(&orphans, "orphans", false, "instead of compacting, delete the Iceberg table's orphan files (uploads of runs killed before their commit)")
	cmd.Flags().BoolVar(&maintain, "maintain", false, "instead of compacting, run the Iceberg table's maintenance: rewrite small files, merge manifests, expire old snapshots (compact.iceberg.maintain)")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "with --orphans: only files older than this (default: the table's compact.iceberg.orphan_age, 72h)")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (overrides storage.dir), without --server")
	return cmd
}
