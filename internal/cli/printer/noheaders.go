package printer

import "io"

// WithoutHeaders returns a writer that passes table output on without its
// header lines, as kubectl's --no-headers prints: the first line, and the
// first line after each blank one (the header of the next kind's table in
// `get a,b`). Every table printer writes through it unchanged, so one
// flag serves them all.
func WithoutHeaders(w io.Writer) io.Writer {
	return &headerless{w: w, atStart: true, afterBlank: true}
}

type headerless struct {
	w io.Writer
	// atStart: the next byte begins a line; afterBlank: the line before
	// it was empty (the output's start counts as one); dropping: the
	// current line is a header; empty: nothing of the current line yet.
	atStart, afterBlank, dropping, empty bool
}

func (h *headerless) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, b := range p {
		if h.atStart {
			h.dropping = h.afterBlank && b != '\n'
			h.empty, h.atStart = true, false
		}
		if b == '\n' {
			if !h.dropping {
				out = append(out, b)
			}
			h.afterBlank, h.atStart = h.empty, true
			continue
		}
		h.empty = false
		if !h.dropping {
			out = append(out, b)
		}
	}
	if _, err := h.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
