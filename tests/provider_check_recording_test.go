package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// An apply recorded with tofu and with Terraform is driven with provider check --json
// --recording, with no provider and no registry: the plan and the create of the recorded
// resource replay (tofu proposed its computed attributes as null, not unknown, and the driver
// proposes what tofu did), and a create the recording does not hold is refused with a hint that
// names what this command has (no --replay-ignore, a flag of oprov run only).
func TestProviderCheckReplaysARecordedCreateAndPlan(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			f := newLoaderFixture(t, helloConfig)
			env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			rec := filepath.Join(t.TempDir(), "apply.jsonl")
			mustOprov(t, env, "run", "-C", f.cfg, "--record", rec, "--", bin, "apply", "-auto-approve", "-input=false")
			f.reg.Stop()
			if err := os.RemoveAll(f.cache); err != nil {
				t.Fatal(err)
			}
			// The provider is configured as it was recorded: its configuration is compared by
			// digest, so the key the recording was made with is needed (the user's key file).
			answers := driveJSON(t, offlineEnv(env), "--recording "+rec,
				`{"call":"configure","config":{"greeting":"Hello"}}`,
				`{"call":"plan","type":"hello_greeting","config":{"name":"oprov"}}`,
				`{"call":"create","type":"hello_greeting","config":{"name":"oprov"}}`,
				`{"call":"create","type":"hello_greeting","config":{"name":"someone-else"}}`)
			answers = answers[1:]
			expectAnswers(t, answers[:2], `"name":"oprov"`, `"Hello, oprov!"`)
			if a := answers[0]; len(a.State) == 0 || a.State["message"] != nil {
				t.Errorf("the replayed plan: %v, want message unknown (null in state)", a.State)
			}
			if e := answers[2].Error; answers[2].OK || !strings.Contains(e, "oprov replay: the recording holds no") ||
				!strings.Contains(e, "Record again with oprov run --record") || strings.Contains(e, "--replay-ignore") {
				t.Errorf("a create the recording does not hold: ok=%v, want a refusal naming what provider check has:\n%s", answers[2].OK, e)
			}
		})
	}
}
