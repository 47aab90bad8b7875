// Package secret is a secret that a configuration names rather than holds:
// an environment variable, a file, or (for tests) the value itself, read
// when it is used. It is a leaf below config and computeopt, so that a
// section both describe (a computed column's s3 keys) holds the same type
// the rest of the config does (config.Secret is an alias of Ref).
package secret

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Ref is a password, token or client secret that the config names
// rather than holds. In YAML it is one of
//
//	password: {env: KAFKA_PASSWORD}              # an environment variable
//	password: {file: /run/secrets/kafka_password} # a file's contents, trailing newline removed
//	password: "inline-only-for-tests"            # the value itself
//
// A mapping, not a "${env:...}" or "file:" prefix inside a string: a
// literal password that happens to start with "file:" cannot be mistaken
// for a reference, and the YAML says which it is without any escaping.
//
// The value is read when it is used (Reveal), not when the config is
// loaded: a rotated file is picked up by the next connection, and a value
// from a variable or file never sits in the parsed config. Every way of printing a Ref (fmt, the
// YAML and JSON encoders, slog) shows only where it comes from, never the
// value; validation errors name the variable or file, never its contents.
type Ref struct {
	Env  string `yaml:"env"`
	File string `yaml:"file"`
	// inline is a value given in the YAML itself, behind a pointer: fmt
	// prints a pointer inside a struct as an address, so even a verb that
	// bypasses String (%d of a config) cannot show the value.
	inline *inlineSecret
}

type inlineSecret struct{ value string }

// ErrUnset is returned by Reveal for a secret that is not configured,
// whose variable is unset or empty, or whose file is empty.
var ErrUnset = errors.New("secret not set")

// Inline is a Ref to value itself, as a YAML scalar gives it: for a caller
// that holds the value already (a test's server keys).
func Inline(value string) Ref { return Ref{inline: &inlineSecret{value}} }

// IsSet reports whether the config gives the secret at all.
func (s Ref) IsSet() bool { return s.Env != "" || s.File != "" || s.inline != nil }

// Reveal returns the secret's value, read now from its variable or file.
// Errors name the variable or file, never a value.
func (s Ref) Reveal() (string, error) {
	switch {
	case s.Env != "":
		v := os.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("environment variable %s: %w (unset or empty)", s.Env, ErrUnset)
		}
		return v, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			// The *PathError names the file only.
			return "", fmt.Errorf("secret file: %w", err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s: %w (empty)", s.File, ErrUnset)
		}
		return v, nil
	case s.inline != nil:
		return s.inline.value, nil
	}
	return "", ErrUnset
}

// String says where the secret comes from: "env:NAME", "file:PATH",
// "(inline)" or "(none)".
func (s Ref) String() string {
	switch {
	case s.Env != "":
		return "env:" + s.Env
	case s.File != "":
		return "file:" + s.File
	case s.inline != nil:
		return "(inline)"
	}
	return "(none)"
}

// GoString keeps %#v from printing the inline value.
func (s Ref) GoString() string { return "secret.Ref(" + s.String() + ")" }

// LogValue keeps slog from printing the inline value.
func (s Ref) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText is what encoding/json (and any text encoder) writes.
func (s Ref) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML writes the reference, or a placeholder for an inline value.
func (s Ref) MarshalYAML() (any, error) {
	switch {
	case s.Env != "":
		return map[string]string{"env": s.Env}, nil
	case s.File != "":
		return map[string]string{"file": s.File}, nil
	}
	return s.String(), nil
}

// UnmarshalYAML takes a scalar as the value and a mapping as a reference.
func (s *Ref) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = Inline(n.Value)
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a secret is a string or a mapping {env: NAME} or {file: PATH}", n.Line)
	}
	// Unknown keys are errors, as everywhere in the config (the decoder's
	// KnownFields does not reach a custom unmarshaler).
	var ref map[string]string
	if err := n.Decode(&ref); err != nil {
		return err
	}
	*s = Ref{}
	for k, v := range ref {
		switch k {
		case "env":
			s.Env = v
		case "file":
			s.File = v
		default:
			return fmt.Errorf("line %d: secret key %q: want env or file", n.Line, k)
		}
	}
	return nil
}

// Check reports a secret that names both an environment variable and a
// file, or an environment variable that is unset now (a server started
// without it would fail at its first connection instead of at start). A
// missing file is reported when it is read: secrets mounted by an
// orchestrator may appear after the config is checked elsewhere.
func (s Ref) Check(key string) []error {
	var errs []error
	if s.Env != "" && s.File != "" {
		errs = append(errs, fmt.Errorf("%s: set env or file, not both", key))
	}
	if s.Env != "" && os.Getenv(s.Env) == "" {
		errs = append(errs, fmt.Errorf("%s: environment variable %s is unset or empty", key, s.Env))
	}
	return errs
}
