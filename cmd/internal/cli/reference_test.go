package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var updateCLIReference = flag.Bool("update-cli-reference", false, "rewrite docs/reference/cli.md from the command tree")

// cliReference renders the command tree as docs/reference/cli.md: each
// command's description and its --help text, in the order of the tree.
// Generated, so that the page cannot drift from the flags; Prometheus keeps
// its CLI reference the same way.
func cliReference() string {
	var b strings.Builder
	b.WriteString(`# CLI reference

Every command of ` + "`sluice`" + ` and its flags, as its ` + "`--help`" + ` prints them. ` + "`sluice-full`" + ` has the same commands and
flags (it adds the cold tier, Arrow answers and Go plugins); ` + "`sluice-bench`" + ` runs the benchmark reports that
` + "`sluice bench`" + ` names. Flags given once take a value (` + "`--table events`" + `); those marked ` + "`stringArray`" + ` may be
repeated, those marked ` + "`strings`" + ` also take a comma-separated list.

This page is generated from the command tree: ` + "`go test ./cmd/internal/cli -run TestCLIReference -update-cli-reference`" + `
rewrites it, and ` + "`TestCLIReference`" + ` fails when it differs from what the commands print.
`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		// Execute adds --help to the command it runs; add it to every
		// command, so that the page is what each --help prints whatever
		// other tests ran before.
		c.InitDefaultHelpFlag()
		b.WriteString("\n## `" + c.CommandPath() + "`\n\n")
		text := c.Long
		if text == "" {
			text = c.Short
		}
		if text != "" {
			b.WriteString("```text\n" + strings.TrimRight(text, "\n") + "\n```\n\n")
		}
		b.WriteString("```text\n" + strings.TrimRight(c.UsageString(), "\n") + "\n```\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
	return b.String()
}

// TestCLIReference fails when docs/reference/cli.md is not what the command
// tree prints (a flag, a command or a help text changed without the page).
func TestCLIReference(t *testing.T) {
	rootCmd.Use = "sluice"
	rootCmd.InitDefaultHelpCmd()
	rootCmd.InitDefaultCompletionCmd()
	got := cliReference()
	page := filepath.Join("..", "..", "..", "docs", "reference", "cli.md")
	if *updateCLIReference {
		if err := os.WriteFile(page, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./cmd/internal/cli -run TestCLIReference -update-cli-reference)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		line := 0
		for line < len(wl) && line < len(gl) && wl[line] == gl[line] {
			line++
		}
		show := func(l []string) string {
			if line < len(l) {
				return l[line]
			}
			return "(end of page)"
		}
		t.Errorf("docs/reference/cli.md differs from the command tree from line %d:\n  page:     %s\n  commands: %s\nregenerate it: go test ./cmd/internal/cli -run TestCLIReference -update-cli-reference", line+1, show(wl), show(gl))
	}
}
