package rdb

import (
	"testing"

	"go.uber.org/goleak"
)

// The checksum helper goroutine (crcworker.go) must be gone once a parse
// ends, fails or is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
