// Package rdbfixture reads the real-server RDB fixtures of rdb/testdata/redis
// for tests outside package rdb: each NAME.rdb was written by a real
// server's SAVE and NAME.json holds what that server said its keys
// contained (rdb/testdata/redis/README.md), so a test can check what sluice
// read from the .rdb against what the server said, not against sluice.
package rdbfixture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Key is one key as the server described it.
type Key struct {
	DB         int
	Key        string // the key's bytes
	Type       string
	ExpireAtMs *int64
	Value      json.RawMessage // the fixture's form (docs: rdb/testdata/redis/README.md)
}

// Fixture is one NAME.json.
type Fixture struct {
	Server, Version, Variant string
	Keys                     []Key
}

// Dir is rdb/testdata/redis, found from this source file, so that tests of
// any package can use it.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "rdb", "testdata", "redis")
}

// Path is the .rdb of the fixture name (e.g. "redis-7.0.15").
func Path(name string) string { return filepath.Join(Dir(), name+".rdb") }

// Load reads the fixture name's .json.
func Load(name string) (*Fixture, error) {
	data, err := os.ReadFile(filepath.Join(Dir(), name+".json"))
	if err != nil {
		return nil, err
	}
	var raw struct {
		Server, Version, Variant string
		Keys                     []struct {
			DB         int             `json:"db"`
			Key        json.RawMessage `json:"key"`
			Type       string          `json:"type"`
			ExpireAtMs *int64          `json:"expire_at_ms"`
			Value      json.RawMessage `json:"value"`
		}
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("rdbfixture: %s: %w", name, err)
	}
	f := &Fixture{Server: raw.Server, Version: raw.Version, Variant: raw.Variant}
	for _, k := range raw.Keys {
		key, err := Bytes(k.Key)
		if err != nil {
			return nil, fmt.Errorf("rdbfixture: %s: key %s: %w", name, k.Key, err)
		}
		f.Keys = append(f.Keys, Key{DB: k.DB, Key: key, Type: k.Type, ExpireAtMs: k.ExpireAtMs, Value: k.Value})
	}
	return f, nil
}

// Bytes decodes the fixtures' BYTES form: a JSON string, or
// {"base64": "..."} for bytes that are not UTF-8.
func Bytes(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var b struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(v, &b); err != nil || b.Base64 == nil {
		return "", fmt.Errorf("not BYTES: %.60s", v)
	}
	raw, err := base64.StdEncoding.DecodeString(*b.Base64)
	return string(raw), err
}

// FlipInValue returns a copy of data (the fixture's .rdb) with one letter
// of a string value stored as it is (not compressed) changed in case: the
// file still parses to its end and only its CRC64 tells it was changed.
func (f *Fixture) FlipInValue(data []byte) ([]byte, error) {
	for _, k := range f.Keys {
		if k.Type != "string" {
			continue
		}
		v, err := Bytes(k.Value)
		if err != nil || len(v) < 16 || bytes.Count(data, []byte(v)) != 1 {
			continue
		}
		at := bytes.Index(data, []byte(v))
		for i := at + len(v)/2; i < at+len(v); i++ {
			if c := data[i] | 0x20; c >= 'a' && c <= 'z' {
				out := bytes.Clone(data)
				out[i] ^= 0x20
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("rdbfixture: %s %s: no uncompressed string value with a letter to flip", f.Server, f.Version)
}
