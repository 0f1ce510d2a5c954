package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// The same apply recorded twice, from no state each time, gives the same lines apart from the
// header's time: a changed answer shows up in a review as a changed line, and nothing else does.
func TestRecordingTheSameApplyTwiceGivesTheSameLines(t *testing.T) {
	bin := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	var recs [2][]string
	for i := range recs {
		os.Remove(filepath.Join(f.cfg, "terraform.tfstate"))
		rec := filepath.Join(t.TempDir(), "apply.jsonl")
		mustOprov(t, env, "run", "-C", f.cfg, "--record", rec, "--record-function-results", "--", bin, "apply", "-auto-approve", "-input=false")
		data, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	if len(recs[0]) != len(recs[1]) || len(recs[0]) < 3 {
		t.Fatalf("the two recordings have %d and %d lines", len(recs[0]), len(recs[1]))
	}
	for i := 1; i < len(recs[0]); i++ { // the header (line 1) holds the time
		if recs[0][i] != recs[1][i] {
			t.Errorf("line %d differs between two recordings of the same apply:\n%s\n%s", i+1, recs[0][i], recs[1][i])
		}
	}
}
