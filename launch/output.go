package launch

import (
	"bufio"
	"io"
	"strconv"
	"sync"
)

// maxLine is the longest piece of a line read at once. With the prefix on, a
// longer line is forwarded as several prefixed lines: every line written
// says which rank wrote it, and nothing is held back (a rank's output may be
// one endless line, such as a progress bar without newlines).
const maxLine = 64 << 10

// maxWhole bounds the memory of an unprefixed line gathered whole (NoPrefix):
// a longer one is written in pieces of about this size, never with a newline
// inserted, but other ranks' lines may then fall between the pieces.
const maxWhole = 16 << 20

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
	var buf []byte
	for {
		line, err := br.ReadSlice('\n')
		more := err == bufio.ErrBufferFull // the line goes on past maxLine
		if prefix == "" {
			// The line stays whole: gathered here and written in one
			// piece at its end. Holding the mux across reads instead would
			// let a rank's unfinished line stop every other rank's output:
			// their pipes fill, they stall, and a rank waiting on them in a
			// collective never finishes its line.
			buf = append(buf, line...)
			if more && len(buf) < maxWhole {
				continue
			}
		} else if len(line) > 0 {
			buf = append(append(buf, prefix...), line...)
		}
		if len(buf) > 0 {
			if buf[len(buf)-1] != '\n' && (prefix != "" || !more) {
				buf = append(buf, '\n')
			}
			m.write(w, buf)
		}
		buf = buf[:0]
		if cap(buf) > 2*maxLine {
			buf = nil // a long line's memory goes back
		}
		if err != nil && !more {
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
