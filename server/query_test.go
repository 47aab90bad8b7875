package server

import (
	"errors"
	"testing"
)

func TestParseWhere(t *testing.T) {
	f := func(in string, want WhereClause) {
		t.Helper()
		got, err := parseWhere(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got.Column != want.Column || got.Op != want.Op || got.Value != want.Value || len(got.Values) != len(want.Values) {
			t.Fatalf("%q = %+v, want %+v", in, got, want)
		}
		for i := range want.Values {
			if got.Values[i] != want.Values[i] {
				t.Fatalf("%q values = %v, want %v", in, got.Values, want.Values)
			}
		}
	}
	f("n>=5", WhereClause{Column: "n", Op: ">=", Value: "5"})
	f("n <= 5", WhereClause{Column: "n", Op: "<=", Value: "5"})
	f("user != bob", WhereClause{Column: "user", Op: "!=", Value: "bob"})
	f("user<>bob", WhereClause{Column: "user", Op: "<>", Value: "bob"})
	f("note = a=b", WhereClause{Column: "note", Op: "=", Value: "a=b"})
	f("user IN (ann, bob)", WhereClause{Column: "user", Op: "IN", Values: []any{"ann", "bob"}})
	f("user in ann,bob", WhereClause{Column: "user", Op: "IN", Values: []any{"ann", "bob"}})
	f("note IS NULL", WhereClause{Column: "note", Op: "IS NULL"})
	f("note is not null", WhereClause{Column: "note", Op: "IS NOT NULL"})
	for _, bad := range []string{"", "n", "=5", "IS NULL"} {
		if _, err := parseWhere(bad); !errors.Is(err, errBadQuery) {
			t.Errorf("%q: %v, want errBadQuery", bad, err)
		}
	}
}

// FuzzParseWhere: any input parses or fails with errBadQuery, and a parse
// names a column and an operator.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"n>=5", "user IN (a,b)", "x IS NOT NULL", "a=b=c", " IN ", "<>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := parseWhere(s)
		if err != nil {
			if !errors.Is(err, errBadQuery) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if w.Column == "" || w.Op == "" {
			t.Fatalf("%q parsed to %+v", s, w)
		}
	})
}
