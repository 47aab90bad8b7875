package luavm

import "runtime/metrics"

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
