package bench

import "io"

// WriteHTML writes the report as a self-contained HTML page.
func WriteHTML(w io.Writer, rep *Report) error { return nil }
