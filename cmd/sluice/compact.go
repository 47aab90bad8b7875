package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(compactCmd())
}

func compactCmd() *cobra.Command {
	var configPath, data, serverURL, tableName string
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
			var res server.CompactResult
			var err error
			if serverURL != "" {
				res, err = (&server.Client{URL: serverURL}).Compact(ctx, tableName)
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
				res, err = s.CompactNow(ctx, tableName)
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
	cmd.Flags().StringVar(&serverURL, "server", "", "URL of a running server; empty = straight on the store (the server must not be running)")
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (YAML), without --server")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (overrides storage.dir), without --server")
	return cmd
}
