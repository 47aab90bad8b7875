package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// sectionHeading is a heading whose whole text is one code span: the
	// path of the section its tables describe ("## `tables[].compact`").
	sectionHeading = regexp.MustCompile("^#{2,4} `([^`]+)`\\s*$")
	// keyRow is a table row whose first cell is one code span.
	keyRow = regexp.MustCompile("^\\| `([^`]+)` \\|")
)

// documentedKeys reads a reference page of section headings and key rows
// and returns the full paths it documents ("tables[].compact.dir").
func documentedKeys(t *testing.T, page string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		if m := sectionHeading.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = ""
			continue
		}
		if m := keyRow.FindStringSubmatch(line); m != nil && section != "" {
			keys[section+"."+m[1]] = true
		}
	}
	return keys
}

// TestConfigReference fails when a key of the config file (a yaml-tagged
// field reachable from config.Config) is missing from
// docs/reference/config.md, or when the page documents a key the structs
// no longer have. The message lists every such key.
func TestConfigReference(t *testing.T) {
	page := filepath.Join(repoRoot(t), "docs", "reference", "config.md")
	documented := documentedKeys(t, page)
	var missing []string
	inCode := map[string]bool{}
	for _, k := range configKeys() {
		inCode[k.path] = true
		if !documented[k.path] {
			missing = append(missing, k.path+" ("+k.owner.Name()+"."+k.field.Name+", "+k.typ.String()+")")
		}
	}
	var stale []string
	for k := range documented {
		if !inCode[k] {
			stale = append(stale, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s lacks %d config key(s): add a row '| `name` | type | meaning |' under the heading '## `section`' for each:\n  %s",
			page, len(missing), strings.Join(missing, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("%s documents %d key(s) the config structs do not have:\n  %s", page, len(stale), strings.Join(uniq(stale), "\n  "))
	}
	if len(inCode) < 50 {
		t.Errorf("the walk of config.Config found %d keys; it is broken", len(inCode))
	}
}
