package rdb

import "errors"

var errUnclosedClass = errors.New("unclosed [ class")

// checkPattern rejects patterns globMatch would read past the end of.
func checkPattern(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '^' {
				j++
			}
			for ; j < len(p) && p[j] != ']'; j++ {
				if p[j] == '\\' {
					j++
				}
			}
			if j >= len(p) {
				return errUnclosedClass
			}
			i = j
		}
	}
	return nil
}

// globMatch reports whether s matches the Redis-style glob p (checked by
// checkPattern). It does not allocate; '*' backtracks to the last star only,
// which keeps it linear-ish on adversarial patterns.
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				starP, starS = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if n, ok := matchClass(p[pi:], s[si]); n > 0 && ok {
					pi += n
					si++
					continue
				}
			case '\\':
				if pi+1 < len(p) && p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if c == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the class starting at p[0] == '['. It returns
// the class length in p and whether c is in it.
func matchClass(p []byte, c byte) (int, bool) {
	i := 1
	not := false
	if i < len(p) && p[i] == '^' {
		not = true
		i++
	}
	match := false
	for i < len(p) && p[i] != ']' {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			if p[i+1] == c {
				match = true
			}
			i += 2
		case i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']':
			lo, hi := p[i], p[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if c >= lo && c <= hi {
				match = true
			}
			i += 3
		default:
			if p[i] == c {
				match = true
			}
			i++
		}
	}
	if i >= len(p) {
		return 0, false
	}
	return i + 1, match != not
}
