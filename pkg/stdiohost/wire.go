package stdiohost

import (
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// Bounds on a number a program sends (docs/stdio-protocol.md). A cty number is a binary float of
// 512 bits, about 155 decimal digits, and any float64 written out exactly has at most 767
// significant digits, so 1000 digits cover every value a provider can mean; exponents of ±9999
// cover every float64 (±308, -324 for the smallest) with a wide margin, and keep every number
// finite. Parsing is then cheap: a longer number (big.ParseFloat is quadratic in its length) or
// 1e999999999 (+Inf) is refused before it is parsed.
//
// One message's numbers together are bounded too, by the work parsing them takes (about a
// microsecond a unit here): a unit per number, one per 32 digits, two per bit of its exponent.
// A million ones, or 10,000 numbers of 1000 digits with exponents of 9999, are over the budget;
// a state of every real provider is far below it.
const (
	maxNumberDigits   = 1000    // digits before the exponent, integer and fraction together
	maxNumberExponent = 9999    // magnitude of the decimal exponent
	maxNumberWork     = 500_000 // units of parsing work for all numbers of one message
)

// checkWire refuses, in one pass over a message's bytes (valid JSON), what the protocol does not
// allow from a program: bytes that are not UTF-8 (JSON decoding would replace them silently), a
// \u escape of a lone UTF-16 surrogate (replaced likewise), and a number over the bounds above.
func checkWire(line []byte) error {
	if !utf8.Valid(line) {
		at := 0
		for at < len(line) {
			r, n := utf8.DecodeRune(line[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return fmt.Errorf("bytes that are not UTF-8 (at byte %d); the protocol is UTF-8 JSON", at)
	}
	work := 0
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == '"':
			n, err := scanString(line, i+1)
			if err != nil {
				return err
			}
			// A string may be read as a number (a number attribute given "1.5", as tofu
			// converts): one that could be is charged as the number it would be.
			if work += stringNumberWork(line[i+1 : max(i+1, n-1)]); work > maxNumberWork {
				return fmt.Errorf("more numbers than one message may carry (a budget of %d units of parsing work: one per number, one per 32 digits, two per bit of an exponent; strings that read as numbers count)", maxNumberWork)
			}
			i = n
		case c == '-' || (c >= '0' && c <= '9'):
			n, w, err := scanNumber(line, i)
			if err != nil {
				return err
			}
			if work += w; work > maxNumberWork {
				return fmt.Errorf("more numbers than one message may carry (a budget of %d units of parsing work: one per number, one per 32 digits, two per bit of an exponent)", maxNumberWork)
			}
			i = n
		default:
			i++
		}
	}
	return nil
}

// stringNumberWork is the parsing work of a string's contents if it were read as a number: 0 for
// one that parseNumber would not parse (not number-shaped, or longer than a number may be).
func stringNumberWork(b []byte) int {
	if len(b) == 0 || len(b) > maxNumberText || !(b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
		return 0
	}
	n, w, err := scanNumber(b, 0)
	if err != nil || n != len(b) {
		return 0
	}
	return w
}

// scanString skips a string's contents from i (after its opening quote) and gives the index past
// its closing quote.
func scanString(b []byte, i int) (int, error) {
	for i < len(b) {
		switch b[i] {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				switch {
				case !ok:
					return len(b), nil // not JSON; the caller has refused it already
				case r >= 0xD800 && r < 0xDC00:
					if lo, ok := hex4(b, i+8); ok && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
						i += 12
						continue
					}
					return 0, fmt.Errorf("a lone UTF-16 surrogate (\\u%04X) in a string; the protocol is UTF-8 JSON", r)
				case r >= 0xDC00 && r < 0xE000:
					return 0, fmt.Errorf("a lone UTF-16 surrogate (\\u%04X) in a string; the protocol is UTF-8 JSON", r)
				}
				i += 6
				continue
			}
			i += 2
		default:
			i++
		}
	}
	return i, nil
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// scanNumber reads the number at b[i:] and gives the index past it and the work parsing it takes,
// or refuses one over the bounds.
func scanNumber(b []byte, i int) (int, int, error) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := 0
	for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '.') {
		if b[i] != '.' {
			digits++
		}
		i++
	}
	if digits > maxNumberDigits {
		return 0, 0, fmt.Errorf("a number of %d digits (%s); the protocol allows at most %d", digits, clip(b[start:i], 20), maxNumberDigits)
	}
	work := 1 + digits/32
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if exp <= maxNumberExponent {
				exp = exp*10 + int(b[i]-'0')
			}
			i++
		}
		if exp > maxNumberExponent {
			return 0, 0, fmt.Errorf("the number %s; the protocol allows exponents of at most ±%d", clip(b[start:i], 40), maxNumberExponent)
		}
		work += 2 * bits.Len(uint(exp))
	}
	return i, work, nil
}
