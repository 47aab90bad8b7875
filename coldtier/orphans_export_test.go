package coldtier

// Test hooks of the run, the in-flight markers and the orphan cleanup;
// each setter returns the function that restores the hook.

// SetRunStaged sets the function run after a run's files are uploaded and
// staged, before its commit.
func SetRunStaged(f func()) (restore func()) {
	old := runStaged
	runStaged = f
	return func() { runStaged = old }
}

// SetMarkerWritten sets the function run after an in-flight marker of
// kind ("run" or "maintain") is written, before the step's first upload.
func SetMarkerWritten(f func(kind string)) (restore func()) {
	old := markerWritten
	markerWritten = f
	return func() { markerWritten = old }
}

// SetMarkerKept sets the function run when a run's fate is decided,
// before its marker is removed.
func SetMarkerKept(f func()) (restore func()) {
	old := markerKept
	markerKept = f
	return func() { markerKept = old }
}

// SetOrphansWaiting sets the function run when an orphan cleanup is about
// to wait for the compactor's maintenance, runs or another cleanup.
func SetOrphansWaiting(f func()) (restore func()) {
	old := orphansWaiting
	orphansWaiting = f
	return func() { orphansWaiting = old }
}

// SetOrphansPlanned sets the function run after an orphan cleanup listed
// its candidates, before it reads the in-flight markers.
func SetOrphansPlanned(f func()) (restore func()) {
	old := orphansPlanned
	orphansPlanned = f
	return func() { orphansPlanned = old }
}

// Hooks are functions a test runs at named points of one compactor's
// steps; each nil one falls back to the package's hook (the Set*
// functions above). Tests that set hooks of their own compactors only
// may run in parallel.
type Hooks = stepHooks

// SetHooks sets c's own hooks; call it while none of c's steps runs.
func SetHooks(c *Compactor, h Hooks) { c.hooks = h }

// InflightDir is the directory of the in-flight markers of a table whose
// location is location.
func InflightDir(location string) string { return inflightDir(location) }

// MarkerBound is how long a cleanup honours an in-flight marker.
const MarkerBound = markerBound
