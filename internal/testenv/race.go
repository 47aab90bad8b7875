//go:build race

package testenv

// RaceEnabled reports whether the test binary was built with -race: tests
// whose cost the race detector multiplies (memory bounds, long
// multi-process runs) skip under it and run in scripts/test's no-race phase.
const RaceEnabled = true
