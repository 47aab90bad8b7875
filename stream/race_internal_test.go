//go:build race

package stream

// raceEnabled: the race detector allocates on its own and slows the
// collector, so a heap bound is asserted without it (scripts/test runs
// TestS3LargeObjectsStreamed apart, without -race).
const raceEnabled = true
