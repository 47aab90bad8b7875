//go:build race

package stream

// raceEnabled: the race detector allocates on its own and slows the
// collector, so a heap bound is asserted without it, and the tests of the
// largest objects shrink or skip under it (scripts/test runs
// TestS3LargeObjectsStreamed and TestS3LargeParquetSpoolDiskFull apart,
// without -race, at full size).
const raceEnabled = true
