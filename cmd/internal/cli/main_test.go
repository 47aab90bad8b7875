package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/sluicedb/sluice/coldtier" // as in sluice-full: the tests cover compact.iceberg
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/compute/goplugin"
)

func TestMain(m *testing.M) {
	// As in sluice-full's main: plugins load, and plugin check children
	// stop here.
	compute.EnablePlugins(goplugin.Open)
	compute.ServePluginCheck()
	code := m.Run()
	removeBuiltSluice()
	os.Exit(code)
}

// TestHelpListsCommands runs the real root command and checks that the
// command groups every later command hangs off are wired in.
func TestHelpListsCommands(t *testing.T) {
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"--help"})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bench"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sluice --help does not mention %q:\n%s", want, out.String())
		}
	}
}

// TestBenchRunsSluiceBench: `sluice bench REPORT ...` runs sluice-bench
// from PATH with the arguments untouched, and without one says how to run
// the reports from the repository.
func TestBenchRunsSluiceBench(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho \"sluice-bench ran: $*\"\n"
	if err := os.WriteFile(filepath.Join(dir, "sluice-bench"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"bench", "pool", "--duration", "1s"})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "sluice-bench ran: pool --duration 1s"; got != want {
		t.Errorf("sluice bench pool: got %q, want %q", got, want)
	}

	t.Setenv("PATH", t.TempDir())
	rootCmd.SetArgs([]string{"bench", "pool"})
	err := rootCmd.Execute()
	if !errors.Is(err, errNoBenchBinary) || !strings.Contains(err.Error(), "go run ./cmd/sluice-bench") {
		t.Errorf("without sluice-bench: %v, want %v naming go run ./cmd/sluice-bench", err, errNoBenchBinary)
	}
}
