package server

import "os"

// FaultEnv names a point at which a server process stops itself, for the
// multi-process tests (e2e/server), which reach a process only through its
// environment. "stop-after-own-part": a coordinator of a cluster query
// stops itself with SIGSTOP right after its own part, before it reads any
// member's answer, as a process frozen from outside at that moment would;
// its members must not wait for it past the reader timeout. Unset in
// production.
const FaultEnv = "SLUICE_SERVER_FAULT"

// faultStopAfterOwnPart is FaultEnv's value for the stop above.
const faultStopAfterOwnPart = "stop-after-own-part"

func init() {
	if os.Getenv(FaultEnv) == faultStopAfterOwnPart {
		// SIGSTOP stops every thread soon, not at once: block here so
		// that this goroutine does not go on reading members meanwhile.
		stop := func() {
			stopSelf()
			select {}
		}
		afterOwnPart.Store(&stop)
	}
}
