package luavm

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// NoHeapLimit as Options.HeapLimit turns the heap budget off.
const NoHeapLimit = math.MaxUint64

// MaxDefaultStringSize caps the default Options.MaxStringSize: 512 MiB, the
// largest string Redis stores, so that no RDB value is out of a script's
// reach.
const MaxDefaultStringSize = 512 << 20

// liveHeap reads the bytes of live and not yet swept heap objects, without
// stopping the world (unlike runtime.ReadMemStats).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// DefaultHeapLimit is the heap budget a Manager uses when Options.HeapLimit
// is 0: three quarters of the Go memory limit when one is set (GOMEMLIMIT or
// debug.SetMemoryLimit), else half of the machine's memory (the smaller of
// its RAM and its cgroup's memory limit), else 0 (no budget) when neither is
// known. Half, because the budget is checked against the whole process's
// heap, garbage not yet collected included, and a server keeps its own
// buffers beside the scripts.
func DefaultHeapLimit() uint64 {
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return uint64(lim) / 4 * 3
	}
	return machineMemory() / 2
}

// DefaultStringSize is the default Options.MaxStringSize for a heap budget:
// a quarter of it (one string of that size and its copies in a
// concatenation stay within the budget), at most MaxDefaultStringSize.
func DefaultStringSize(heapLimit uint64) int64 {
	if heapLimit == 0 || heapLimit/4 > MaxDefaultStringSize {
		return MaxDefaultStringSize
	}
	return int64(heapLimit / 4)
}
