//go:build unix

package server

import "syscall"

// fdLimit is the process's limit of open files (the soft one, which the Go
// runtime raised to the hard one at start); 0 when unknown.
func fdLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
