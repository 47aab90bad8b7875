package rdbtool

import (
	"errors"
	"io"
)

// ProgressReader passes r through, setting p to the bytes read so far: a
// progress bar for a snapshot being read by someone else (streamed to a
// server, or parsed from a reader). A nil p is fine. When r is an
// io.Seeker, so is the ProgressReader (a rewound upload restarts the bar).
func ProgressReader(r io.Reader, p *Progress) io.Reader {
	return &progressReader{r: r, p: p}
}

type progressReader struct {
	r io.Reader
	p *Progress
	n int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.n += int64(n)
	pr.p.Set(pr.n)
	return n, err
}

// errNotSeeker: the underlying reader cannot seek.
var errNotSeeker = errors.New("rdbtool: progress reader: the input cannot seek")

func (pr *progressReader) Seek(off int64, whence int) (int64, error) {
	s, ok := pr.r.(io.Seeker)
	if !ok {
		return 0, errNotSeeker
	}
	n, err := s.Seek(off, whence)
	if err == nil {
		pr.n = n
		pr.p.Set(n)
	}
	return n, err
}
