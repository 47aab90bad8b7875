package coldtier

// SetAfterColdRead sets the function a two-tier query runs between its
// cold side and its hot side, and returns the function that restores it.
func SetAfterColdRead(f func()) (restore func()) {
	old := afterColdRead
	afterColdRead = f
	return func() { afterColdRead = old }
}

// CommitWaiting reports whether a writer waits for (or holds) c's lock:
// a shared lock cannot be taken now.
func CommitWaiting(c *Compactor) bool {
	if c.mu.TryRLock() {
		c.mu.RUnlock()
		return false
	}
	return true
}
