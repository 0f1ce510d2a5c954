package recording

import (
	"encoding/json"
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
	_, err := Read(strings.NewReader(b.String()), "rec.jsonl", Limits{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d providers", maxProviders)) {
		t.Fatalf("a recording of %d providers: %v", maxProviders+1, err)
	}
}

// A recording's schema_wire is what replay sends tofu, and its schema is what a reviewer reads
// and what Read checks every recorded value against. A recording whose two schemas differ
// (here tofu would be told name is a number, while every value was checked as a string) is
// refused: replay would answer with values of types tofu was never told.
func TestReadRefusesTwoSchemas(t *testing.T) {
	var line, number map[string]any
	if err := json.Unmarshal([]byte(providerLineOf(t, "string")), &line); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(providerLineOf(t, "number")), &number); err != nil {
		t.Fatal(err)
	}
	line["schema_wire"] = number["schema_wire"]
	p, _ := json.Marshal(line)
	_, err := Read(strings.NewReader(header+"\n"+string(p)+"\n"), "rec.jsonl", Limits{})
	if err == nil || !strings.Contains(err.Error(), "schema_wire") {
		t.Fatalf("a recording whose schema and schema_wire differ: %v", err)
	}
}
