package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// routePattern is what a net/http ServeMux pattern of sluice looks like:
// a method and a path, or a pprof path (registered without a method).
var routePattern = regexp.MustCompile(`^((GET|HEAD|POST|PUT|PATCH|DELETE) )?/[A-Za-z0-9_./{}-]*$`)

// registeredRoutes returns the mux patterns of package server: the first
// field of every `route` composite literal of its product files (the one
// route table, server/auth.go's routes, where each route states its
// permission), and any string literal passed as the first argument of a
// Handle or HandleFunc call outside newMux (which registers that table).
// Reading the source rather than a running mux keeps the test free of a
// server (no store, no config); a pattern passed through a variable would
// be missed, so the test also requires the count to stay plausible.
func registeredRoutes(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		record := func(e ast.Expr, what string) {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: %s with a pattern that is not a literal; the reference test cannot read it", fset.Position(e.Pos()), what)
				return
			}
			pattern, err := strconv.Unquote(lit.Value)
			if err != nil || !routePattern.MatchString(pattern) {
				t.Errorf("%s: %s: not a route pattern this test knows", fset.Position(lit.Pos()), lit.Value)
				return
			}
			seen[pattern] = true
		}
		for _, decl := range f.Decls {
			fn, isFunc := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "route" && len(n.Elts) > 0 {
						record(n.Elts[0], "a route")
					}
					if at, ok := n.Type.(*ast.ArrayType); ok {
						if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "route" {
							for _, el := range n.Elts {
								if cl, ok := el.(*ast.CompositeLit); ok && len(cl.Elts) > 0 {
									record(cl.Elts[0], "a route")
								}
							}
						}
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || len(n.Args) == 0 || sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc" {
						return true
					}
					if isFunc && fn.Name.Name == "newMux" {
						return true
					}
					record(n.Args[0], "a route registered")
				}
				return true
			})
		}
	}
	routes := make([]string, 0, len(seen))
	for r := range seen {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	return routes
}

// documentedRoutes are the first cells of docs/reference/http-api.md's
// "Routes" table.
func documentedRoutes(t *testing.T, page string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n## Routes\n")
	if i < 0 {
		t.Fatalf("%s: no \"## Routes\" section", page)
	}
	text = text[i+len("\n## Routes\n"):]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	routes := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if m := keyRow.FindStringSubmatch(line); m != nil {
			routes[m[1]] = true
		}
	}
	return routes
}

// TestHTTPReference fails when a route that package server registers (its
// Handler, the lease routes, pprof's) is missing from the routes table of
// docs/reference/http-api.md, or when the table lists one no longer
// registered. The message lists every such route.
func TestHTTPReference(t *testing.T) {
	root := repoRoot(t)
	page := filepath.Join(root, "docs", "reference", "http-api.md")
	routes := registeredRoutes(t, filepath.Join(root, "server"))
	// Today's server registers 25; far fewer means routes are registered
	// in a way this test no longer reads.
	if len(routes) < 20 {
		t.Fatalf("found %d routes in server/*.go: %v; the test no longer reads how routes are registered", len(routes), routes)
	}
	documented := documentedRoutes(t, page)
	var missing, stale []string
	registered := map[string]bool{}
	for _, r := range routes {
		registered[r] = true
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !registered[r] {
			stale = append(stale, r)
		}
	}
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("%s lacks %d route(s) that server registers: add a row '| `METHOD /path` | what it does | answers |' to \"Routes\" for each:\n  %s",
			page, len(missing), strings.Join(missing, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("%s lists %d route(s) server does not register:\n  %s", page, len(stale), strings.Join(stale, "\n  "))
	}
}
