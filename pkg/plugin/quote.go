package plugin

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// quoteText makes text from outside oprov (a far side's error and stderr, a provider's path or
// output) safe to print on a terminal: every control character but newline and tab, every
// format character (bidirectional overrides, U+2028 ...) and every invalid byte is written as an
// escape (\x1b, \u202e), so no escape sequence (a title, a clear, an OSC 52 clipboard write)
// reaches the terminal as one.
func quoteText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// quotingWriter passes what the far side writes to its stderr on to w (oprov -v), quoted.
type quotingWriter struct{ w io.Writer }

func (q quotingWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(q.w, quoteText(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}
