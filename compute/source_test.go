package compute

import (
	"errors"
	"testing"
)

func TestResolveSource(t *testing.T) {
	f := func(fn string, want Source) {
		t.Helper()
		got, err := ResolveSource(fn)
		if err != nil || got != want {
			t.Errorf("ResolveSource(%q) = %+v, %v; want %+v", fn, got, err, want)
		}
	}
	// Single-line inline Lua is code, not a URL or path (Talaria's bug).
	f(`function main(row) return row.a end`, Source{Kind: SourceInline, Code: `function main(row) return row.a end`})
	f(`function main(row) return "x.lua" end`, Source{Kind: SourceInline, Code: `function main(row) return "x.lua" end`})
	multi := "local json = require(\"json\")\nfunction main(row) return json.encode(row) end\n"
	f(multi, Source{Kind: SourceInline, Code: multi})
	// A multi-line text is code even when a line looks like a path; the
	// trailing newline of a YAML block scalar does not make a path code.
	f("-- scripts/a.lua\nfunction main(r) return 1 end", Source{Kind: SourceInline, Code: "-- scripts/a.lua\nfunction main(r) return 1 end"})
	f("scripts/a.lua\n", Source{Kind: SourceFile, Path: "scripts/a.lua"})
	// file:///x is the absolute /x (Talaria made it relative).
	f("file:///etc/sluice/trim.lua", Source{Kind: SourceFile, Path: "/etc/sluice/trim.lua"})
	f("file://localhost/etc/sluice/trim.lua", Source{Kind: SourceFile, Path: "/etc/sluice/trim.lua"})
	f("file:///opt/p/trim.so", Source{Kind: SourceFile, Path: "/opt/p/trim.so", Plugin: true})
	f("scripts/trim.lua", Source{Kind: SourceFile, Path: "scripts/trim.lua"})
	f("  /abs/trim.lua  ", Source{Kind: SourceFile, Path: "/abs/trim.lua"})
	f("plugins/trim.so", Source{Kind: SourceFile, Path: "plugins/trim.so", Plugin: true})
	f("http://127.0.0.1:8080/trim.lua", Source{Kind: SourceHTTP, URL: "http://127.0.0.1:8080/trim.lua"})
	f("https://example.com/p/trim.so?v=2", Source{Kind: SourceHTTP, URL: "https://example.com/p/trim.so?v=2", Plugin: true})
	f("make://identifier", Source{Kind: SourceBuiltin, URL: "make://identifier"})
	f("s3://scripts/teams/a/trim.lua", Source{Kind: SourceS3, URL: "s3://scripts/teams/a/trim.lua", Bucket: "scripts", Key: "teams/a/trim.lua"})
	f("s3://plugins/upper.so", Source{Kind: SourceS3, URL: "s3://plugins/upper.so", Bucket: "plugins", Key: "upper.so", Plugin: true})

	for _, bad := range []string{"", "   ", "file://scripts/a.lua", "file:///", "s3://bucket", "s3://bucket/", "s3:///a.lua", "s3://b/dir/", "gs://b/x.so", "http:///nohost.lua"} {
		if got, err := ResolveSource(bad); !errors.Is(err, ErrBadSource) {
			t.Errorf("ResolveSource(%q) = %+v, %v; want ErrBadSource", bad, got, err)
		}
	}
}

func TestSourceLoader(t *testing.T) {
	for fn, want := range map[string]string{
		"make://timestamp": "builtin",
		"a.so":             "plugin",
		"http://h/a.so":    "plugin",
		"s3://b/a.so":      "plugin",
		"s3://b/a.lua":     "lua",
		"a.lua":            "lua",
		"return 1":         "lua",
	} {
		src, err := ResolveSource(fn)
		if err != nil || src.Loader() != want {
			t.Errorf("ResolveSource(%q).Loader() = %q, %v; want %q", fn, src.Loader(), err, want)
		}
	}
}
