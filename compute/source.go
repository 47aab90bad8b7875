package compute

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// SourceKind says where a function's code comes from.
type SourceKind uint8

// The source kinds.
const (
	SourceInline  SourceKind = iota + 1 // Lua code in the config itself
	SourceFile                          // a local file (plain path or file://)
	SourceHTTP                          // an http:// or https:// URL, re-polled
	SourceBuiltin                       // make://name, compiled into sluice
	SourceS3                            // s3://bucket/key, re-polled by ETag
)

// Source is a resolved `func`.
type Source struct {
	Kind SourceKind
	// Code is the Lua code (SourceInline).
	Code string
	// Path is the file path (SourceFile): absolute for file:// URIs,
	// otherwise as written (Resolve makes it relative to the config's dir).
	Path string
	// URL is the http(s) URL (SourceHTTP), the make:// URI (SourceBuiltin)
	// or the s3:// URI (SourceS3).
	URL string
	// Bucket and Key name the object of a SourceS3.
	Bucket, Key string
	// Plugin is true when the file or URL names a Go plugin (ends in .so).
	Plugin bool
}

func (s Source) String() string {
	switch s.Kind {
	case SourceInline:
		return "inline"
	case SourceFile:
		return s.Path
	case SourceHTTP, SourceBuiltin, SourceS3:
		return s.URL
	}
	return "?"
}

// Loader names the handler kind of s: "lua", "plugin" or "builtin".
func (s Source) Loader() string {
	switch {
	case s.Kind == SourceBuiltin:
		return "builtin"
	case s.Plugin:
		return "plugin"
	}
	return "lua"
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*://`)

// ErrBadSource is wrapped by every ResolveSource error.
var ErrBadSource = errors.New("bad func")

// ResolveSource decides, explicitly and in this order, what a `func` is:
//
//  1. text containing a newline (once surrounding white space is trimmed, so
//     the newline ending a YAML block scalar does not count) is inline Lua
//     code, never a path or URL;
//  2. make://name is a built-in;
//  3. file:///abs/path (or file://localhost/abs/path) is that absolute file;
//     file://relative is an error (the "relative" would be a host name);
//  4. http:// and https:// URLs are fetched and re-polled;
//  5. s3://bucket/key is an object, fetched and re-polled by its ETag;
//  6. any other scheme:// is an error;
//  7. a single line ending in .lua or .so is a file path;
//  8. any other single line is inline Lua code.
//
// Files and URLs whose path ends in .so are Go plugins, others are Lua.
func ResolveSource(fn string) (Source, error) {
	s := strings.TrimSpace(fn)
	if s == "" {
		return Source{}, fmt.Errorf("%w: func is empty", ErrBadSource)
	}
	if strings.ContainsAny(s, "\n\r") {
		return Source{Kind: SourceInline, Code: fn}, nil
	}
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "make://"):
		return Source{Kind: SourceBuiltin, URL: s}, nil
	case strings.HasPrefix(lower, "file://"):
		u, err := url.Parse(s)
		if err != nil {
			return Source{}, fmt.Errorf("%w: %q: %v", ErrBadSource, s, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return Source{}, fmt.Errorf("%w: %q: file URI with host %q; write file:///absolute/path or a plain relative path", ErrBadSource, s, u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return Source{}, fmt.Errorf("%w: %q: file URI without a path", ErrBadSource, s)
		}
		return Source{Kind: SourceFile, Path: filepath.FromSlash(u.Path), Plugin: strings.HasSuffix(u.Path, ".so")}, nil
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return Source{}, fmt.Errorf("%w: %q is not a valid URL", ErrBadSource, s)
		}
		return Source{Kind: SourceHTTP, URL: s, Plugin: strings.HasSuffix(u.Path, ".so")}, nil
	case strings.HasPrefix(lower, "s3://"):
		bucket, key, _ := strings.Cut(s[len("s3://"):], "/")
		if bucket == "" || key == "" || strings.HasSuffix(key, "/") {
			return Source{}, fmt.Errorf("%w: %q: want s3://bucket/key", ErrBadSource, s)
		}
		return Source{Kind: SourceS3, URL: s, Bucket: bucket, Key: key, Plugin: strings.HasSuffix(key, ".so")}, nil
	case schemeRE.MatchString(s):
		return Source{}, fmt.Errorf("%w: %q: unsupported scheme (want a path, file://, http(s)://, s3:// or make://)", ErrBadSource, s)
	case strings.HasSuffix(s, ".lua"):
		return Source{Kind: SourceFile, Path: s}, nil
	case strings.HasSuffix(s, ".so"):
		return Source{Kind: SourceFile, Path: s, Plugin: true}, nil
	}
	return Source{Kind: SourceInline, Code: fn}, nil
}

// inlineHint explains, for a single-line inline source that fails to compile,
// why it was taken as code: it was probably meant as a path.
func inlineHint(code string) string {
	s := strings.TrimSpace(code)
	if strings.ContainsAny(s, "\n\r") || strings.ContainsAny(s, " \t(") {
		return ""
	}
	return " (taken as inline Lua: it is one line, not a URL, and does not end in .lua or .so)"
}
