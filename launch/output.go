package launch

import (
	"bufio"
	"io"
	"strconv"
	"sync"
)

// maxLine is the longest line forwarded in one piece; longer lines are split
// into several prefixed lines.
const maxLine = 64 << 10

// outMux serializes writes to the launcher's outputs so that lines of
// different ranks never interleave mid-line.
type outMux struct{ mu sync.Mutex }

func (m *outMux) write(w io.Writer, b []byte) {
	m.mu.Lock()
	w.Write(b)
	m.mu.Unlock()
}

// copyLines copies r to w line by line, each line prefixed, until r ends. A
// final line without a newline gets one.
func (m *outMux) copyLines(w io.Writer, r io.Reader, prefix string) {
	br := bufio.NewReaderSize(r, maxLine)
	buf := make([]byte, 0, 256)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			buf = append(append(buf[:0], prefix...), line...)
			if buf[len(buf)-1] != '\n' {
				buf = append(buf, '\n')
			}
			m.write(w, buf)
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

func rankPrefix(r int, quiet bool) string {
	if quiet {
		return ""
	}
	return "[rank " + strconv.Itoa(r) + "] "
}
