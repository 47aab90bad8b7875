// Package coltype is the one type system of sluice's columns: the type
// names a config may give a schema column or a computed column, their
// aliases, and the one parser of them. Package compute coerces a
// function's result to a Type and package table stores columns of a Type;
// both re-export this Type (compute.Type and table.Type are aliases of it),
// so a name parses the same way everywhere.
//
// coltype imports nothing of sluice: it sits below compute and table.
package coltype

import (
	"errors"
	"fmt"
	"strings"
)

// Type is a column type. The zero Type is invalid.
//
// The numbers of Int64 to JSON are written into table blocks on disk (one
// byte a column): never renumber them; a new type takes the next number.
type Type uint8

// The column types; Parse's aliases (Talaria's names) are given for each.
const (
	Int64     Type = iota + 1 // int64, bigint, long, uint64
	Float64                   // float64, double
	String                    // string, text, varchar
	Bool                      // bool, boolean
	Timestamp                 // timestamp, time
	JSON                      // json, map
	Int32                     // int32, integer, uint32 (tables store it as Int64)
)

// ErrUnknown is wrapped by Parse's error for a name that is no type.
var ErrUnknown = errors.New("unknown type")

// names maps every accepted spelling (lower case) to its type. "int" and
// "float" are not among them: whether they mean 32 or 64 bits is a guess.
var names = map[string]Type{
	"int32": Int32, "integer": Int32, "uint32": Int32,
	"int64": Int64, "bigint": Int64, "long": Int64, "uint64": Int64,
	"float64": Float64, "double": Float64,
	"string": String, "text": String, "varchar": String,
	"bool": Bool, "boolean": Bool,
	"timestamp": Timestamp, "time": Timestamp,
	"json": JSON, "map": JSON,
}

// Parse returns the Type named name or one of its aliases
// (case-insensitive, surrounding spaces ignored). Its error wraps
// ErrUnknown and quotes name; the caller adds which column it was.
func Parse(name string) (Type, error) {
	if t, ok := names[strings.ToLower(strings.TrimSpace(name))]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("%w %q (want int32, int64, float64, string, bool, timestamp, json or an alias: integer, uint32, bigint, long, uint64, double, text, varchar, boolean, time, map)", ErrUnknown, name)
}

// Valid reports whether t is one of the types.
func (t Type) Valid() bool { return t >= Int64 && t <= Int32 }

// String returns the canonical name of t.
func (t Type) String() string {
	switch t {
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float64:
		return "float64"
	case String:
		return "string"
	case Bool:
		return "bool"
	case Timestamp:
		return "timestamp"
	case JSON:
		return "json"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// MarshalText writes the canonical name (persisted table schemas, the
// describe endpoints).
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses a name as Parse does.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
