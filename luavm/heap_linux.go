package luavm

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// machineMemory is the memory this process may use: the machine's RAM, or
// its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) when lower.
// 0 when unknown.
func machineMemory() uint64 {
	var total uint64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		total = uint64(si.Totalram) * uint64(si.Unit)
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil { // "max": no limit
			continue
		}
		if n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}
