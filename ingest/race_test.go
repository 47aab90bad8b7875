//go:build race

package ingest

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
