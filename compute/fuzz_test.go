package compute

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeRow: whatever decodes re-encodes to JSON that decodes to the
// same row (numbers, nulls and nesting survive), and matches encoding/json.
func FuzzDecodeRow(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"big":9007199254740993,"neg":-9223372036854775808,"huge":18446744073709551616}`,
		`{"f":1.5,"e":1e400,"z":-0.0,"t":1e-7}`, `{"n":null,"a":[1,null,{"b":[]}],"s":"\u00e9\n\"\\\u2028"}`,
		`{"a":1}{"b":2}`, `[1]`, `{"a":`, `{"a":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		row, err := DecodeRow(data)
		if err != nil {
			return
		}
		out, err := AppendJSONRow(nil, row, nil)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode %#v: %v", data, row, err)
		}
		again, err := DecodeRow(out)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		out2, _ := AppendJSONRow(nil, again, nil)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
		var std bytes.Buffer
		enc := json.NewEncoder(&std)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(row); err == nil && !bytes.Equal(out, bytes.TrimSuffix(std.Bytes(), []byte("\n"))) {
			t.Fatalf("differs from encoding/json:\n%s\n%s", out, std.Bytes())
		}
	})
}

// FuzzResolveSource: never panics; multi-line text is always code; a
// resolved file path is never empty.
func FuzzResolveSource(f *testing.F) {
	for _, s := range []string{"function main(r) return 1 end", "a.lua", "file:///x.lua", "file://h/x", "http://h/a.so", "make://json?omit=a", "s3://b/k", "x\ny", " \n "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ResolveSource(s)
		if err != nil {
			return
		}
		if strings.ContainsAny(strings.TrimSpace(s), "\n\r") && src.Kind != SourceInline {
			t.Fatalf("%q has a newline but resolved to %+v", s, src)
		}
		if src.Kind == SourceFile && src.Path == "" {
			t.Fatalf("%q resolved to an empty path", s)
		}
	})
}

// FuzzParseConfig: any YAML either parses into a config that validates, or
// fails with an error; never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("computed:\n  - {name: a, type: int64, func: make://timestamp}\n"))
	f.Add([]byte("filters:\n  - {name: f, func: \"function main(r) return true end\", on_error: keep}\n"))
	f.Add([]byte("computed:\n  - name: a\n    type: jsonb\n    func: s3://x\n    timeout: -1s\n"))
	f.Add([]byte("computed: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that does not validate: %v", err)
		}
	})
}
