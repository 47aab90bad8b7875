package luavm

import _ "unsafe" // for go:linkname

// runtime.procPin / procUnpin give the id of the P (scheduler processor) the
// goroutine runs on. They are internal, but the runtime keeps them reachable
// with go:linkname for the packages that already use them (its "hall of
// shame" list: bytedance/gopkg, choleraehyq/pid, ...). We use them for one
// thing: choosing the per-P slot of a pool (see pool.local), as sync.Pool
// does internally; the id is only a hint, the goroutine may move right after.
//
//go:linkname runtime_procPin runtime.procPin
func runtime_procPin() int

//go:linkname runtime_procUnpin runtime.procUnpin
func runtime_procUnpin()

// procID returns the id of the P the caller is running on.
func procID() int {
	id := runtime_procPin()
	runtime_procUnpin()
	return id
}
