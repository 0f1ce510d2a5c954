package pybuild

import (
	"fmt"
	"strconv"
	"strings"
)

// allowsMinor reports whether a PEP 440 specifier set such as ">=3.11,<4" or "!=3.12.*"
// admits CPython 3.minor (taken as its first release, 3.minor.0, except that a wildcard
// "==3.minor.*" or "!=3.minor.*" matches the whole series). An empty set admits everything; a
// clause oprov cannot read is an error.
func allowsMinor(spec string, minor int) (bool, error) {
	v := []int{3, minor, 0}
	for _, clause := range strings.Split(spec, ",") {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			continue
		}
		op := ""
		for _, o := range []string{"~=", "==", "!=", "<=", ">=", "<", ">"} {
			if strings.HasPrefix(clause, o) {
				op = o
				break
			}
		}
		if op == "" {
			return false, fmt.Errorf("requires-python %q: cannot read %q", spec, clause)
		}
		rest := strings.TrimSpace(clause[len(op):])
		wild := strings.HasSuffix(rest, ".*")
		if wild && op != "==" && op != "!=" {
			return false, fmt.Errorf("requires-python %q: %q has a wildcard with %s", spec, clause, op)
		}
		want, err := parseRelease(strings.TrimSuffix(rest, ".*"))
		if err != nil {
			return false, fmt.Errorf("requires-python %q: %w", spec, err)
		}
		var ok bool
		switch {
		case wild:
			// "3.12.*" matches the series; "3.12.1.*" part of it, which counts as admitting it.
			match := true
			for i, n := range want {
				if i < 2 && v[i] != n {
					match = false
				}
			}
			if len(want) > 2 && op == "!=" {
				match = false // excluding part of a series still admits the rest
			}
			ok = match == (op == "==")
		case op == "~=":
			if len(want) < 2 {
				return false, fmt.Errorf("requires-python %q: %q needs two release numbers", spec, clause)
			}
			upper := append([]int{}, want[:len(want)-1]...)
			upper[len(upper)-1]++
			ok = compareRelease(v, want) >= 0 && compareRelease(v, upper) < 0
			if !ok && len(want) > 2 && want[0] == v[0] && want[1] == v[1] {
				ok = true // ~=3.12.2 admits later 3.12 releases
			}
		default:
			c := compareRelease(v, want)
			ok = map[string]bool{"==": c == 0, "!=": c != 0, "<=": c <= 0, ">=": c >= 0, "<": c < 0, ">": c > 0}[op]
			if !ok && len(want) > 2 && want[0] == v[0] && want[1] == v[1] && (op == ">=" || op == ">" || op == "==") {
				ok = true // >=3.12.4 admits the later 3.12 releases
			}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// parseRelease reads "3.12.1" as [3 12 1].
func parseRelease(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a release version", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// compareRelease compares two release versions, padding the shorter with zeros.
func compareRelease(a, b []int) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
