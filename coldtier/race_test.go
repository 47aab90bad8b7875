//go:build race

package coldtier_test

// raceEnabled: the race detector multiplies memory, so the memory bound is
// checked without it (scripts/test runs TestCompactionMemoryBound apart).
const raceEnabled = true
