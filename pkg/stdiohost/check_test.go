package stdiohost

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesPassTheirSteps runs each example provider, in a copy of its directory, through its
// steps file: oprov's planning, replacement, import, data source and function against a real
// program.
func TestExamplesPassTheirSteps(t *testing.T) {
	for _, ex := range []string{"stdio-python", "stdio-js", "stdio-sh"} {
		t.Run(ex, func(t *testing.T) {
			if _, err := exec.LookPath("jq"); err != nil && ex == "stdio-sh" {
				if os.Getenv("CI") != "" {
					t.Fatal("the sh example needs jq on PATH")
				}
				t.Skip("the sh example needs jq on PATH")
			}
			dir := filepath.Join(t.TempDir(), ex)
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", ex))); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "steps.json"))
			if err != nil {
				t.Fatal(err)
			}
			var steps Steps
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			if err := d.Decode(&steps); err != nil {
				t.Fatal(err)
			}
			var seen []string
			err = Check(context.Background(), dir, &steps, func(r StepResult) { seen = append(seen, r.What) })
			if err != nil {
				t.Fatalf("%v (steps run: %s)", err, strings.Join(seen, ", "))
			}
			if len(seen) != len(steps.Steps)+1 {
				t.Errorf("%d results for %d steps", len(seen), len(steps.Steps))
			}
			// A wrong expectation fails the step that holds it.
			steps.Steps[0].Expect = json.RawMessage(`{"revision": 99}`)
			os.Remove(filepath.Join(dir, "kv-check.json"))
			err = Check(context.Background(), dir, &steps, func(StepResult) {})
			if err == nil || !strings.Contains(err.Error(), "step 1 (apply kv_entry.a)") {
				t.Errorf("a wrong expectation: %v", err)
			}
		})
	}
}
