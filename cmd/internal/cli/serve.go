package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(serveCmd())
}

func serveCmd() *cobra.Command {
	var configPath, data, listen, logLevel string
	var pprof, check bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the ingest and query server (stops gracefully on SIGTERM, reloads scripts and TLS certificates on SIGHUP)",
		Long: "Serves POST /v1/tables/{table}/rows, GET/POST /v1/tables/{table}/query, /v1/tables, /metrics,\n" +
			"/healthz and /readyz for the tables of the config. Every config field can be overridden by a\n" +
			"SLUICE_... environment variable (see docs/server.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			// SIGHUP reloads every table's scripts and the listener's TLS
			// certificate files (its default action would end the process
			// at once, without a log line or a flush). Caught from the
			// start: one that arrives while the store opens waits for
			// Serve.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			// The first signal starts the graceful shutdown (bounded by
			// limits.shutdown_timeout); a second one ends the process at
			// once, as if no handler were installed.
			go func() {
				<-ctx.Done()
				stop()
			}()
			cfg, err := loadServerConfig(configPath, listen, pprof, cmd.Flags().Changed("pprof"))
			if err != nil {
				return err
			}
			if check {
				for _, w := range cfg.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				if err := server.Check(ctx, cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d tables\n", configPath, len(cfg.Tables))
				return nil
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return err
			}
			s, err := server.New(ctx, cfg, server.Options{StorageDir: data, Logger: slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})), SetMemoryLimit: true, ProcessLog: true, ReloadSignals: hup})
			if err != nil {
				return err
			}
			return s.ListenAndServe(ctx)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (YAML)")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (default: the config's storage.dir, ./data)")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address (default: the config's listen.http, 127.0.0.1:8080)")
	cmd.Flags().BoolVar(&pprof, "pprof", false, "serve /debug/pprof/")
	cmd.Flags().BoolVar(&check, "check", false, "validate the config and load every computed column and filter, report every problem, and exit")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// loadServerConfig loads the config and applies the flags that override it.
// What only the packages that run a config can check (a computed column's
// error policy, an RDB filter's key types) is reported with what config
// found, at the same place (path: tables[i] ...): one run shows every
// problem.
func loadServerConfig(path, listen string, pprof, pprofSet bool) (*config.Config, error) {
	cfg, err := config.Load(path)
	if cfg == nil {
		return nil, err // unreadable, or not YAML
	}
	if more := server.ValidateOptions(cfg); more != nil {
		err = errors.Join(err, fmt.Errorf("%s: %w", path, more))
	}
	if err != nil {
		return nil, err
	}
	if listen != "" {
		cfg.Listen.HTTP = listen
	}
	if pprofSet {
		cfg.Listen.Pprof = pprof
	}
	return cfg, cfg.Validate()
}
