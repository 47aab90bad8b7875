package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// benchBinary is the binary holding the benchmark reports.
const benchBinary = "sluice-bench"

// benchCmd is `sluice bench REPORT ...`. The reports live in their own
// binary, sluice-bench (cmd/sluice-bench), so that sluice does not carry
// the test servers they start (versitygw, a Kafka broker), the plugin
// builder nor package testing. This command runs sluice-bench when it is
// installed beside this binary or on PATH, and otherwise says how to run it.
var benchCmd = &cobra.Command{
	Use:   "bench REPORT [flags]",
	Short: "Run a benchmark report (pool, rdb, ingest, kafka, compact, scaling) with the sluice-bench binary",
	Long: "The benchmark reports are a separate binary, sluice-bench, run by this command when it is beside\n" +
		"this one or on PATH (go install ./cmd/...). From the repository: go run ./cmd/sluice-bench REPORT [flags].",
	DisableFlagParsing: true,
	RunE: func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return cmd.Help()
		}
		exe, err := findBenchBinary()
		if err != nil {
			return err
		}
		run := exec.CommandContext(cmd.Context(), exe, args...)
		run.Stdin, run.Stdout, run.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		err = run.Run()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() > 0 {
			// sluice-bench has printed its error: exit as it did.
			os.Exit(ee.ExitCode())
		}
		return err
	},
}

func init() {
	rootCmd.AddCommand(benchCmd)
}

// errNoBenchBinary: sluice-bench is neither beside this binary nor on PATH.
var errNoBenchBinary = errors.New("the benchmark reports are in their own binary, " + benchBinary +
	", not found beside this one nor on PATH: from the repository run go run ./cmd/sluice-bench REPORT [flags] " +
	"(or go build -o sluice-bench ./cmd/sluice-bench)")

// findBenchBinary is sluice-bench beside this executable, else on PATH.
func findBenchBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), benchBinary)
		if fi, err := os.Stat(beside); err == nil && !fi.IsDir() {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(benchBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("bench: %w", errNoBenchBinary)
}
