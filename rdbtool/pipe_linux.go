//go:build linux

package rdbtool

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// growPipe raises the kernel buffer of w to pipeSize when w is a pipe (the
// export piped into another program). With the default 64 KiB, every 256 KiB
// write waits for the reader four times; a bigger buffer lets both sides run
// without handing the CPU back and forth. Failure (not a pipe, over
// /proc/sys/fs/pipe-max-size) leaves it as it was.
func growPipe(w io.Writer) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeSize)
}

const pipeSize = 1 << 20
