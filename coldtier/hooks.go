package coldtier

// stepHooks are functions a test runs at named points of one compactor's
// steps, to force an interleaving of two actors (a cleanup during a run,
// a crash between two writes). Each nil one falls back to the
// package-wide hook of the same name (runStaged, markerWritten, ...),
// which only a test running alone may set; hooks of a compactor's own let
// the tests that each own their compactors run in parallel. Set while
// none of the compactor's steps runs; read by its steps only.
type stepHooks struct {
	RunStaged       func()            // after a run's files are staged, before its commit
	MarkerWritten   func(kind string) // after an in-flight marker is written
	MarkerKept      func()            // when a run's fate is decided, before its marker goes
	OrphansWaiting  func()            // when an orphan cleanup is about to wait
	OrphansPlanned  func()            // after an orphan cleanup listed its candidates
	RewriteStaged   func()            // after a rewrite is staged, before its commit
	ExpiryCommitted func()            // after an expiry's commit, before its deletions
}

// hook runs the compactor's own hook, or the package's when it has none.
func hook(own, pkg func()) {
	if own != nil {
		own()
		return
	}
	pkg()
}
