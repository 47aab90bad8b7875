package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(ingestCmd())
}

func ingestCmd() *cobra.Command {
	var configPath, data, tableName, format, onBad string
	var serverURL nodeURL
	var cf clientFlags
	var batch int
	var rf rdbIngestFlags
	cmd := &cobra.Command{
		Use:   "ingest --table T FILE|URL...",
		Short: "Ingest JSON lines, JSON, CSV, Parquet files or Redis RDB snapshots (local or http(s), gzip or not) into a table",
		Long: "With --server the rows go through a running server (decoded here, sent as NDJSON batches,\n" +
			"retried on 429/503); otherwise straight into the store directory of --config (--data), which\n" +
			"must not be in use by a running server. Each batch is durable when acknowledged.\n\n" +
			"An RDB snapshot (--format rdb, or a .rdb file) becomes one row per key (db, key, type,\n" +
			"encoding, expire_at, memory_bytes, elements, value as JSON; docs/rdb.md), filtered by\n" +
			"--db/--type/--prefix/--pattern/--key/--min-size; with --server it is streamed to the\n" +
			"server as application/x-redis-rdb and parsed there as it arrives.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if tableName == "" {
				return errors.New("--table is required")
			}
			policy, err := ingest.ParsePolicy(onBad)
			if err != nil {
				return err
			}
			formatOf := func(src string) (ingest.Format, error) {
				if format == "" {
					return ingest.FormatOfPath(src), nil
				}
				return ingest.FormatOf(formatType(format))
			}
			rdbOpts, err := rf.options(batch)
			if err != nil {
				return err
			}
			// Framed Schema Registry messages are decoded with the table's
			// registry, which only the store's side knows.
			framed := server.FramedFormat(formatType(format))
			if framed != "" && serverURL != "" {
				return fmt.Errorf("--format %s: not with --server: post the file as it is (Content-Type %s, docs/streams.md), or ingest it straight into the store", format, formatType(format))
			}
			if serverURL != "" {
				c, err := cf.client(string(serverURL), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				for _, src := range args {
					f, err := formatOf(src)
					if err != nil {
						return err
					}
					if f == ingest.RDB {
						err := ingestRDB(ctx, cmd, src, rf.noProgress, func(r io.Reader) (server.RDBResult, error) {
							res, err := c.PostRDB(ctx, tableName, r, rdbOpts)
							if err != nil {
								err = fmt.Errorf("%s: %w", src, err)
							}
							return res, err
						})
						if err != nil {
							return err
						}
						continue
					}
					rc, err := server.OpenSource(ctx, src)
					if err != nil {
						return err
					}
					res, err := c.IngestStream(ctx, tableName, rc, f, policy, batch)
					rc.Close()
					if err != nil {
						return ingestFailed(res, fmt.Errorf("%s: %w", src, err))
					}
					report(cmd.OutOrStdout(), src, res)
				}
				return nil
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
			for _, src := range args {
				if framed != "" {
					res, err := s.IngestFramedSource(ctx, tableName, src, framed, batch)
					if err != nil {
						return ingestFailed(res, err)
					}
					report(cmd.OutOrStdout(), src, res)
					continue
				}
				if f, err := formatOf(src); err != nil {
					return err
				} else if f == ingest.RDB {
					o := rdbOpts
					o.Name = src
					err := ingestRDB(ctx, cmd, src, rf.noProgress, func(r io.Reader) (server.RDBResult, error) {
						return s.IngestRDB(ctx, tableName, r, o)
					})
					if err != nil {
						return err
					}
					continue
				}
				res, err := s.IngestSource(ctx, tableName, src, batch)
				if err != nil {
					return ingestFailed(res, err) // err names src
				}
				report(cmd.OutOrStdout(), src, res)
			}
			return s.Close()
		},
	}
	cmd.Flags().StringVar(&tableName, "table", "", "table to ingest into")
	cmd.Flags().Var(&serverURL, "server", "URL of a running server (e.g. https://sluice.example:8443, or 127.0.0.1:8080 for http://); empty = straight into the store")
	cf.register(cmd)
	cmd.Flags().StringVar(&configPath, "config", "sluice.yaml", "server config (without --server)")
	cmd.Flags().StringVar(&data, "data", "", "storage directory (without --server; default: the config's storage.dir)")
	cmd.Flags().StringVar(&format, "format", "", "ndjson, json, csv, parquet, rdb, or avro-framed, protobuf-framed, json-schema-framed (Schema Registry messages, each after its 4-byte length, decoded with the table's schema_registry) (default: by file extension; .rdb is rdb)")
	cmd.Flags().StringVar(&onBad, "on-bad-line", "reject", "reject or skip (with --server; otherwise the table's on_bad_line)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per batch")
	rf.register(cmd)
	return cmd
}

func formatType(f string) string {
	switch f {
	case "csv":
		return "text/csv"
	case "json":
		return "application/json"
	case "parquet":
		return "application/vnd.apache.parquet"
	case "rdb":
		return ingest.RDBContentType
	case "avro-framed":
		return server.ContentTypeAvroFramed
	case "protobuf-framed":
		return server.ContentTypeProtobufFramed
	case "json-schema-framed":
		return server.ContentTypeJSONSchemaFramed
	}
	return "application/x-ndjson"
}

// ingestFailed is the error of a source whose ingestion failed: nothing is
// printed to stdout for it (a {"accepted":0,...} line beside "connection
// refused" read as a result). When batches were stored before the failure,
// the error says how many rows, since those stay.
func ingestFailed(res ingest.Result, err error) error {
	if res.Accepted > 0 {
		return fmt.Errorf("%w (%d rows were accepted and stored before the error)", err, res.Accepted)
	}
	return err
}

// report prints a source's result as one line of JSON on stdout.
func report(w io.Writer, src string, res ingest.Result) {
	b, _ := json.Marshal(res)
	fmt.Fprintf(w, "%s: %s\n", src, b)
}
