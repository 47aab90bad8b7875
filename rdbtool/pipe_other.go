//go:build !linux

package rdbtool

import "io"

// growPipe is a no-op where F_SETPIPE_SZ does not exist.
func growPipe(io.Writer) {}
