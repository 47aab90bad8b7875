//go:build race

package server

// raceEnabled: the race detector multiplies memory, so memory bounds are
// checked without it (scripts/test runs TestIngestMemoryBound and
// TestScriptMemoryGopherLua apart).
const raceEnabled = true
