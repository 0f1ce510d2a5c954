package recording

import (
	"fmt"
	"strings"
	"testing"
)

// A recording arrives in a pull request. Replay starts one stand-in (a socket, a gRPC server)
// for each provider it declares and names every one to tofu in one environment variable, so a
// recording declaring thousands of providers costs that many servers before tofu refuses an
// environment too long to exec. Read bounds the count, with the limit named.
func TestReadBoundsProviders(t *testing.T) {
	p := providerLine(t)
	var b strings.Builder
	b.WriteString(header + "\n")
	for i := range maxProviders + 1 {
		b.WriteString(strings.Replace(p, `"example.com/x/x"`, fmt.Sprintf(`"example.com/x/x%d"`, i), 1) + "\n")
	}
	_, err := Read(strings.NewReader(b.String()), "rec.jsonl")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d providers", maxProviders)) {
		t.Fatalf("a recording of %d providers: %v", maxProviders+1, err)
	}
}
