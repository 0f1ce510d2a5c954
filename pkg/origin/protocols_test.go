package origin

import (
	"strings"
	"testing"
)

func TestCheckProtocols(t *testing.T) {
	for _, ok := range [][]string{{"5.0"}, {"6.0"}, {"4.0", "5.1"}, {"5"}, {"6.2"}, nil} {
		if err := checkProtocols("1.0.0", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for protocols, want := range map[string]string{
		"4.0":     "version 1.0.0 speaks plugin protocol 4.0 only; oprov (like OpenTofu) launches providers over protocol 5 or 6",
		"4.0 7.0": "version 1.0.0 speaks plugin protocol 4.0 and 7.0 only",
		"5.0 six": `malformed plugin protocol "six" for version 1.0.0`,
		"v5":      `malformed plugin protocol "v5"`,
		"":        `malformed plugin protocol ""`,
	} {
		err := checkProtocols("1.0.0", strings.Split(protocols, " "))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", protocols, err, want)
		}
	}
}
