//go:build !linux

package luavm

// machineMemory is unknown outside Linux: no default heap budget.
func machineMemory() uint64 { return 0 }
