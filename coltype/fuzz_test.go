package coltype

import "testing"

// FuzzParseValues feeds arbitrary text to the value parsers: each returns
// a value or an error wrapping ErrValue, never panics, and a value's text
// parses back to the same value.
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{"2026-11-29", "1969-12-31", "13:45:01.000123", "23:59", "123e4567-e89b-12d3-a456-426614174000",
		"{123e4567-e89b-12d3-a456-426614174000}", "12.50", "-0.01", "1e2", "9999999999999999.99", "1e-400", "+.5", "-"} {
		f.Add(s, uint8(18), uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, p, sc uint8) {
		if d, err := ParseDate(s); err == nil {
			if back, err := ParseDate(d.String()); err != nil || back != d {
				t.Fatalf("date %q: %v reads back as %v, %v", s, d, back, err)
			}
		}
		if tod, err := ParseTimeOfDay(s); err == nil {
			if tod < 0 || tod >= MicrosPerDay {
				t.Fatalf("time of day %q: %d µs outside a day", s, tod)
			}
			if back, err := ParseTimeOfDay(tod.String()); err != nil || back != tod {
				t.Fatalf("time of day %q: %v reads back as %v, %v", s, tod, back, err)
			}
		}
		if u, err := ParseUUID(s); err == nil {
			if back, err := ParseUUID(u.String()); err != nil || back != u {
				t.Fatalf("uuid %q: %v reads back as %v, %v", s, u, back, err)
			}
		}
		precision, scale := int(p%MaxDecimalPrecision)+1, int(sc%(MaxDecimalPrecision+1))
		if scale > precision {
			scale = precision
		}
		if d, err := ParseDecimal(s, precision, scale); err == nil {
			if d.Scale != scale {
				t.Fatalf("decimal %q: scale %d, want %d", s, d.Scale, scale)
			}
			if back, err := ParseDecimal(d.String(), precision, scale); err != nil || back != d {
				t.Fatalf("decimal %q at (%d,%d): %v reads back as %v, %v", s, precision, scale, d, back, err)
			}
		}
	})
}
