//go:build !unix

package server

// fdLimit is unknown on this system.
func fdLimit() uint64 { return 0 }
