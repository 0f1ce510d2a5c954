package providerrelease

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Sums is the content of a SHA256SUMS file: file name to lowercase hex sha256.
type Sums map[string]string

// ParseSums parses the "HEX  NAME" lines of a SHA256SUMS file (sha256sum's format; a '*' before
// the name, for binary mode, is allowed). Blank lines are skipped; anything else malformed is an
// error that names the line.
func ParseSums(r io.Reader) (Sums, error) {
	sums := Sums{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: want \"SHA256  FILENAME\"", n)
		}
		name = strings.TrimPrefix(strings.TrimLeft(name, " "), "*")
		if len(sum) != 64 || !isLowerHex(strings.ToLower(sum)) {
			return nil, fmt.Errorf("line %d: %q is not a sha256 in hex", n, sum)
		}
		if name == "" || strings.ContainsAny(name, "/\\") {
			return nil, fmt.Errorf("line %d: %q is not a plain file name", n, name)
		}
		sum = strings.ToLower(sum)
		if prev, dup := sums[name]; dup && prev != sum {
			return nil, fmt.Errorf("line %d: %s is listed twice with different sums", n, name)
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return sums, nil
}

func isLowerHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// Bytes renders the file in sha256sum's format, sorted by name.
func (s Sums) Bytes() []byte {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", s[n], n)
	}
	return b.Bytes()
}
