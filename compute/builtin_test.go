package compute

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBuiltins(t *testing.T) {
	load := func(uri string) Handler {
		t.Helper()
		h, err := NewBuiltin().Load(uri)
		if err != nil {
			t.Fatal(err)
		}
		if h.String() != "builtin" {
			t.Fatalf("String() = %q", h.String())
		}
		return h
	}
	id := load("make://identifier")
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[any]bool{}
	for range 1000 {
		v, err := id.Value(nil)
		if err != nil || !hex32.MatchString(v.(string)) || seen[v] {
			t.Fatalf("identifier %v, %v (repeat: %v)", v, err, seen[v])
		}
		seen[v] = true
	}
	before := time.Now().Unix()
	v, err := load("make://timestamp").Value(nil)
	if ts, ok := v.(int64); err != nil || !ok || ts < before || ts > time.Now().Unix() {
		t.Errorf("timestamp = %#v, %v", v, err)
	}
	row := map[string]any{"key1": int64(1), "key2": "x", "a": int64(9007199254740993), "n": nil}
	v, err = load("make://json?omit=key1,key2").Value(row)
	if err != nil || v != `{"a":9007199254740993,"n":null}` {
		t.Errorf("json omit = %v, %v", v, err)
	}
	if len(row) != 4 {
		t.Errorf("make://json changed the row: %v", row)
	}
	for _, bad := range []string{"make://uuid", "make://identifier?x=1", "make://json?keep=a", "http://x"} {
		if _, err := NewBuiltin().Load(bad); err == nil || !strings.Contains(err.Error(), "builtin") {
			t.Errorf("Load(%q) err = %v", bad, err)
		}
	}
}
