package archtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// modulePath is sluice's module: imports under it are the ones the layers
// govern; every other import (the standard library, third-party modules) is
// not this test's business.
const modulePath = "github.com/sluicedb/sluice"

// repoRoot is the module's directory, from this package's (internal/archtest).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// layerRule is one line of the allowed-imports list: the packages it names
// (exact, or "dir/*" for every package below dir) and what they may import
// of sluice ("*" for anything, none for nothing).
type layerRule struct {
	line     int
	packages []string
	allowed  []string
}

func matches(pattern, pkg string) bool {
	if pattern == "*" {
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/*"); ok {
		return strings.HasPrefix(pkg, dir+"/")
	}
	return pattern == pkg
}

// allowedImports reads the fenced block under the "## Allowed imports"
// heading of docs/architecture.md. Each line is
//
//	pkg[, pkg...]: import import ...
//
// with "-" for no import of sluice; '#' starts a comment.
func allowedImports(t *testing.T, doc string) []layerRule {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n## Allowed imports\n"
	text := string(data)
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("%s: no heading %q", doc, strings.TrimSpace(heading))
	}
	lineNo := strings.Count(text[:i+len(heading)], "\n")
	text = text[i+len(heading):]
	start := strings.Index(text, "```text\n")
	if start < 0 {
		t.Fatalf("%s: no ```text block under %q", doc, strings.TrimSpace(heading))
	}
	lineNo += strings.Count(text[:start], "\n") + 1
	text = text[start+len("```text\n"):]
	end := strings.Index(text, "\n```")
	if end < 0 {
		t.Fatalf("%s: the allowed-imports block is not closed", doc)
	}
	var rules []layerRule
	sc := bufio.NewScanner(strings.NewReader(text[:end]))
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if c := strings.Index(line, "#"); c >= 0 {
			line = line[:c]
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		left, right, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s:%d: want 'package: imports', got %q", doc, lineNo, line)
		}
		r := layerRule{line: lineNo}
		for _, p := range strings.Split(left, ",") {
			r.packages = append(r.packages, strings.TrimSpace(p))
		}
		for _, a := range strings.Fields(right) {
			if a != "-" {
				r.allowed = append(r.allowed, a)
			}
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: the allowed-imports block is empty", doc)
	}
	return rules
}

// listedPackage is what `go list -json` says of a package that the layers
// look at.
type listedPackage struct {
	ImportPath string
	Imports    []string
}

// ourImports lists sluice's packages (relative to the module) and the
// sluice packages each imports in its product code (test files aside: a
// test may start any server), built with tags.
func ourImports(t *testing.T, root, tags string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-tags", tags, "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.Bytes())
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		var ours []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				ours = append(ours, rel)
			}
		}
		pkgs[name] = ours
	}
	return pkgs
}

// ruleFor is the rule of pkg: the one naming it exactly, else the one with
// the longest "dir/*" that covers it.
func ruleFor(rules []layerRule, pkg string) (layerRule, bool) {
	best, bestLen, found := layerRule{}, -1, false
	for _, r := range rules {
		for _, p := range r.packages {
			n := len(p)
			if p == pkg {
				n = 1 << 30
			}
			if matches(p, pkg) && n > bestLen {
				best, bestLen, found = r, n, true
			}
		}
	}
	return best, found
}

// TestLayers fails when a package imports one of sluice's packages that the
// allowed-imports list of docs/architecture.md does not allow it, when a
// package is missing from the list, and when the list names a package that
// no longer exists. Both builds are checked: the default one and -tags
// luajit (luajit's engine imports more than its stub).
func TestLayers(t *testing.T) {
	root := repoRoot(t)
	doc := filepath.Join(root, "docs", "architecture.md")
	rules := allowedImports(t, doc)

	var problems []string
	seen := map[string]bool{}
	reported := map[string]bool{} // "pkg imports imp": once, whichever build shows it first
	for _, tags := range []string{"", "luajit"} {
		pkgs := ourImports(t, root, tags)
		names := make([]string, 0, len(pkgs))
		for name := range pkgs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, pkg := range names {
			seen[pkg] = true
			r, ok := ruleFor(rules, pkg)
			if !ok {
				problems = append(problems, fmt.Sprintf("package %s is not in the list: add a line '%s: <the sluice packages it may import>'", pkg, pkg))
				continue
			}
		imports:
			for _, imp := range pkgs[pkg] {
				for _, a := range r.allowed {
					if matches(a, imp) {
						continue imports
					}
				}
				if reported[pkg+" "+imp] {
					continue
				}
				reported[pkg+" "+imp] = true
				build := "the default build"
				if tags != "" {
					build = "-tags " + tags
				}
				allowed := strings.Join(r.allowed, " ")
				if allowed == "" {
					allowed = "nothing of sluice"
				}
				problems = append(problems, fmt.Sprintf("package %s imports %s (%s), which its line %d does not allow (it may import: %s)", pkg, imp, build, r.line, allowed))
			}
		}
	}
	for _, r := range rules {
		for _, p := range r.packages {
			used := false
			for pkg := range seen {
				used = used || matches(p, pkg)
			}
			if !used {
				problems = append(problems, fmt.Sprintf("line %d names %s, which is no package of the module", r.line, p))
			}
		}
	}
	// A package missing from the list is met in both builds.
	problems = uniq(problems)
	if len(problems) > 0 {
		t.Errorf("%s, \"Allowed imports\" (change the code or, with the reasons in the same commit, the page):\n  %s", doc, strings.Join(problems, "\n  "))
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
