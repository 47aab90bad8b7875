//go:build race

package rdb

// raceEnabled: allocation counts are not meaningful under the race detector
// (it allocates on its own), and the large-file tests run 10x slower.
const raceEnabled = true
