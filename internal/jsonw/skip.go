package jsonw

// The skippers below walk JSON text without decoding it, for the readers
// that look up a few members of a value and pass over the rest (a where
// clause's path into a json column, a change event's envelope). They
// check the brackets and quotes they pass over, not the values inside:
// a reader decodes, and so checks, only what it uses. They take the text
// as a string or as bytes (one instantiation each: no copy, no
// allocation).

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace[T ~string | ~[]byte](doc T, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipString returns the offset after the closing quote of the JSON
// string that starts at doc[i], and whether it has escapes; ok is false
// when doc[i] is not a quote or the string is not closed.
func SkipString[T ~string | ~[]byte](doc T, i int) (end int, escaped, ok bool) {
	if i >= len(doc) || doc[i] != '"' {
		return 0, false, false
	}
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, true
		}
	}
	return 0, false, false
}

// SkipValue returns the offset after the JSON value that starts at doc[i];
// ok is false when there is none there or it is not closed. Objects and
// arrays are skipped by counting brackets outside strings; a number,
// true, false or null ends at the first delimiter or whitespace.
func SkipValue[T ~string | ~[]byte](doc T, i int) (end int, ok bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch doc[i] {
	case '"':
		end, _, ok := SkipString(doc, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				end, _, ok := SkipString(doc, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(doc) {
		switch doc[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}
