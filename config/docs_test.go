package config_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/config"
)

// TestDocConfigsParse parses every YAML block of the user docs that is a
// whole server config (it has a top-level tables: key; the others are
// fragments of one, or compute configs): a config a user copies must be
// accepted as written. A block that is meant to be refused says so on a comment line
// "# refused:" and must then fail.
func TestDocConfigsParse(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "docs", "*", "*.md"))
	docs = append(docs, more...)
	// Secrets named by {env: X} resolve to a value: the docs name variables
	// a reader sets, not ones this test's environment has. SLUICE_*
	// overrides stay unset.
	env := func(name string) (string, bool) {
		if strings.HasPrefix(name, "SLUICE_") {
			return "", false
		}
		return "from-env", true
	}
	checked := map[string]int{}
	for _, doc := range docs {
		for _, b := range yamlBlocks(t, doc) {
			if !strings.HasPrefix(b.text, "tables:") && !strings.Contains(b.text, "\ntables:") {
				continue // a fragment of a server config, or a compute config
			}
			where := filepath.Base(doc) + ":" + itoa(b.line)
			// A secret's {env: NAME} is checked against the process
			// environment: give the names the block uses a value.
			for _, m := range envRef.FindAllStringSubmatch(b.text, -1) {
				t.Setenv(m[1], "from-env")
			}
			_, err := config.Parse([]byte(b.text), env)
			refused := strings.Contains(b.text, "# refused:")
			switch {
			case refused && err == nil:
				t.Errorf("%s: the block marked '# refused:' was accepted", where)
			case !refused && err != nil:
				t.Errorf("%s: %v", where, err)
			}
			checked[filepath.Base(doc)]++
		}
	}
	// The pages whose configs a user copies first must have been checked.
	for _, doc := range []string{"s3.md", "grpc.md", "streams.md", "upserts.md", "cold-tier.md", "cluster.md"} {
		if checked[doc] == 0 {
			t.Errorf("docs/%s: no whole-config YAML block found (the test would check nothing there)", doc)
		}
	}
}

var envRef = regexp.MustCompile(`\{env: *([A-Za-z_][A-Za-z0-9_]*)\}`)

type block struct {
	line int
	text string
}

// yamlBlocks returns the fenced ```yaml blocks of the Markdown file path.
func yamlBlocks(t *testing.T, path string) []block {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *bytes.Buffer
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur, start = &bytes.Buffer{}, n+1
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, block{start, cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
