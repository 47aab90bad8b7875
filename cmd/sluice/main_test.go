package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/compute"
)

func TestMain(m *testing.M) {
	// As in main: plugin check children stop here.
	compute.ServePluginCheck()
	os.Exit(m.Run())
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
