//go:build !unix

package server

// stopSelf does nothing where there is no SIGSTOP: the caller then blocks
// only the goroutine that reached the fault point, which is what the
// coordinator's members see of a frozen coordinator (it reads none of their
// answers).
func stopSelf() {}
