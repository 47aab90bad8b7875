package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	fencedBlock  = regexp.MustCompile("(?s)```.*?```")
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// TestDocLinks fails when a relative link of README.md or a page under
// docs/ names a file that does not exist: pages move (into docs/perf,
// docs/reference) and a link left behind would send a reader nowhere.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fencedBlock.ReplaceAllString(string(data), "")
		for _, m := range markdownLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, _, _ := strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), path)); err != nil {
				rel, _ := filepath.Rel(root, page)
				t.Errorf("%s: link %s: no such file", rel, target)
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d relative links in %d pages; the test no longer reads them", links, len(pages))
	}
}
