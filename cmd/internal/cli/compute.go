package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/server"
)

func init() {
	rootCmd.AddCommand(computeCmd(), validateCmd(), testCmd())
}

func computeCmd() *cobra.Command {
	var config, input, output, deadLetter string
	var batch int
	var watch time.Duration
	var allowLoss bool
	cmd := &cobra.Command{
		Use:   "compute",
		Short: "Apply computed columns and filters to JSON lines",
		Long: "Reads JSON lines (stdin by default), applies the config's filters and computed columns in batches,\n" +
			"writes JSON lines (stdout by default) and prints a summary of errors per column to stderr.\n\n" +
			"Exit status: non-zero when a batch was rejected, and when rows were lost: dead letters (deadletter\n" +
			"policy) or lines that are not JSON objects, with no --dead-letter file to keep them. Pass\n" +
			"--dead-letter FILE to keep them, or --allow-loss to exit 0 anyway. Rows dropped by filters and by\n" +
			"the drop policy are what the config asked for, not a loss.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			p, err := compute.OpenFile(ctx, config, compute.Options{Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))})
			if err != nil {
				return err
			}
			defer p.Close()
			if watch > 0 {
				wctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { p.Watch(wctx, watch); close(done) }()
				defer func() { cancel(); <-done }()
			}
			in, out := cmd.InOrStdin(), cmd.OutOrStdout()
			if input != "" && input != "-" {
				f, err := os.Open(input)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			// "-", /dev/stdout and /dev/stderr are this process's streams,
			// written as they are (outfile.go says why); other paths are
			// files: the output replaces the file's contents (it is this
			// run's result), dead letters are appended (a rerun must not
			// destroy the rows an earlier run kept).
			streams := map[int]io.Writer{stdoutStream: out, stderrStream: cmd.ErrOrStderr()}
			outStream := stdoutStream
			if output != "" {
				if outStream = stdStream(output); outStream == notStdStream {
					f, err := os.Create(output)
					if err != nil {
						return err
					}
					defer f.Close()
					out = f
				} else {
					out = streams[outStream]
				}
			}
			var dead io.Writer
			var flushLines []*lineWriter
			if deadLetter != "" {
				if s := stdStream(deadLetter); s != notStdStream {
					lw := &lineWriter{w: streams[s]}
					flushLines = append(flushLines, lw)
					dead = lw
					if s == outStream {
						lw := &lineWriter{w: out}
						flushLines = append(flushLines, lw)
						out = lw
					}
				} else {
					f, err := os.OpenFile(deadLetter, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
					if err != nil {
						return err
					}
					defer f.Close()
					dead = f
				}
			}
			sum, err := compute.RunJSONLines(ctx, p, in, out, dead, batch)
			for _, lw := range flushLines {
				if ferr := lw.Flush(); err == nil {
					err = ferr
				}
			}
			if werr := compute.WriteSummary(cmd.ErrOrStderr(), sum, p.Stats()); err == nil {
				err = werr
			}
			if err == nil && sum.RejectedBatches > 0 {
				err = fmt.Errorf("%d batches rejected", sum.RejectedBatches)
			}
			// Dead letters count the bad lines too (they are dead letters of
			// the input).
			if err == nil && dead == nil && !allowLoss && sum.DeadLetters > 0 {
				err = fmt.Errorf("%d rows lost (dead letters, %d of them lines that are not JSON objects) with no --dead-letter file: pass --dead-letter FILE to keep them, or --allow-loss to exit 0", sum.DeadLetters, sum.BadLines)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&config, "config", "computed.yaml", "YAML file with computed: and filters:")
	cmd.Flags().StringVar(&input, "input", "-", "JSON lines to read (- = stdin)")
	cmd.Flags().StringVar(&output, "output", "-", "JSON lines to write (- = stdout; a file is replaced)")
	cmd.Flags().StringVar(&deadLetter, "dead-letter", "", "file to append dead letters to (deadletter policy, bad lines, rejected batches; - or /dev/stdout, /dev/stderr: that stream)")
	cmd.Flags().IntVar(&batch, "batch", 512, "rows per batch (one Lua VM acquisition per column per batch)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "poll script files and URLs this often and swap new versions in (0 = off)")
	cmd.Flags().BoolVar(&allowLoss, "allow-loss", false, "exit 0 even when dead letters or bad lines were dropped for lack of --dead-letter")
	return cmd
}

func validateCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Compile every script, open every plugin and report every problem at once",
		Long: "Validates a computed-columns config (computed: and filters:) or a server config (tables:, as\n" +
			"`sluice serve --check` does), compiling every script and opening every plugin.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if isServerConfig(config) {
				cfg, err := loadServerConfig(config, "", false, false)
				if err != nil {
					return err
				}
				if err := server.Check(cmd.Context(), cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d tables\n", config, len(cfg.Tables))
				return nil
			}
			p, err := compute.OpenFile(cmd.Context(), config, compute.Options{})
			if err != nil {
				return err
			}
			defer p.Close()
			columns, filters := 0, 0
			for _, s := range p.Stats() {
				if s.Filter {
					filters++
				} else {
					columns++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d computed columns, %d filters\n", config, columns, filters)
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "computed.yaml", "YAML file with computed: and filters:")
	return cmd
}

// isServerConfig reports whether the YAML file at path is a server config
// (it has a top-level tables: list) rather than a computed-columns one. A
// file that cannot be read or parsed is left to the loaders, whose errors
// say where.
func isServerConfig(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	_, ok := top["tables"]
	return ok
}

func testCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "test CASES.yaml...",
		Short: "Run unit tests of columns and filters written as YAML cases",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed, total := 0, 0
			for _, file := range args {
				tf, err := compute.LoadTestFile(file)
				if err != nil {
					return err
				}
				cfg := config
				if cfg == "" {
					cfg = tf.Config
				}
				if cfg == "" {
					return fmt.Errorf("%s: no config: give --config or `config:` in the file", file)
				}
				p, err := compute.OpenFile(cmd.Context(), cfg, compute.Options{})
				if err != nil {
					return err
				}
				for _, r := range compute.RunTests(cmd.Context(), p, tf.Tests) {
					total++
					if r.Err != nil {
						failed++
						fmt.Fprintf(cmd.OutOrStdout(), "FAIL %s: %s: %v\n", file, r.Name, r.Err)
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "ok   %s: %s\n", file, r.Name)
					}
				}
				p.Close()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d tests, %d failed\n", total, failed)
			if failed > 0 {
				return errors.New("tests failed")
			}
			return nil
		},
	}
	// No backquotes in the usage: pflag takes a backquoted word as the
	// flag's value name ("--config config:").
	cmd.Flags().StringVar(&config, "config", "", "config to test (default: the config: key of each cases file)")
	return cmd
}
