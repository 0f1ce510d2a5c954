package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// stackConfig is a recorder_stack whose setting blocks hold a dynamic value: a string and a
// number, so tofu sends the list of blocks as a dynamic value (a tuple).
func stackConfig(db string) string {
	return `terraform {
  required_providers {
    recorder = { source = "example.com/acme/recorder" }
  }
}
resource "recorder_stack" "s" {
  name = "one"
  setting {
    key   = "db"
    value = "` + db + `"
  }
  setting {
    key   = "replicas"
    value = 3
  }
}
`
}

// Deny rules fail closed: a rule on a value inside a list of blocks holding a dynamic attribute
// stops the plan (the provider applies nothing), a deny rule that cannot be evaluated denies,
// and the same configuration with another value goes through (the rules do decide).
func TestMiddlewareFailClosed(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			for _, tc := range []struct {
				name, db, rule, want string
				denied               bool
			}{
				{"value-inside", "prod-db", `resource.type == 'recorder_stack' && planned.setting.exists(s, s.value == 'prod-db')`, `"no-prod" denies create of recorder_stack`, true},
				{"other-value", "dev-db", `resource.type == 'recorder_stack' && planned.setting.exists(s, s.value == 'prod-db')`, "", false},
				{"rule-errors", "dev-db", `resource.type == 'recorder_stack' && planned.nosuch == 'x'`, `"no-prod" cannot be evaluated on create of recorder_stack, so it denies it`, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					cfg, env := middlewareDir(t, bin, "rule \"no-prod\" {\n  deny = \""+strings.ReplaceAll(tc.rule, `"`, `\"`)+"\"\n}\n")
					writeFile(t, filepath.Join(cfg, "main.tf"), stackConfig(tc.db))
					r := oprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false", "-no-color")
					out := r.Stdout + r.Stderr
					served := servedCalls(t, cfg)
					if !tc.denied {
						if r.Code != 0 || served["ApplyResourceChange"] != 1 {
							t.Fatalf("not denied, yet the apply failed or did not reach the provider (exit %d, served %s):\n%s", r.Code, sortedCounts(served), out)
						}
						return
					}
					if r.Code == 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), tc.want) {
						t.Fatalf("want a failure saying %q (exit %d):\n%s", tc.want, r.Code, out)
					}
					if served["ApplyResourceChange"] != 0 || served["PlanResourceChange"] == 0 {
						t.Errorf("the provider served %s: it must plan, and never apply", sortedCounts(served))
					}
				})
			}
		})
	}
}

// Every call that can change something is judged with its own action, and a deny rule on it
// stops it: a data source read, a function call, an import block, and a moved block across types.
func TestMiddlewareEveryCallJudged(t *testing.T) {
	bin := peers.Require(t, "tofu")
	head := "terraform {\n  required_providers {\n    recorder = { source = \"example.com/acme/recorder\" }\n  }\n}\n"
	thing := "resource \"recorder_thing\" \"a\" {\n  name = \"one\"\n}\n"
	for _, tc := range []struct {
		name, setup, tf, rpc, action, rule string
	}{
		{"data-source", "", head + "data \"recorder_info\" \"i\" {\n  input = \"x\"\n}\n", "ReadDataSource", "read", "resource.kind == 'data_source' && planned.input == 'x'"},
		{"function", "", head + "output \"o\" { value = provider::recorder::shout(\"hi\") }\n", "CallFunction", "call", "resource.type == 'shout' && planned[0] == 'hi'"},
		{"import", "", head + thing + "import {\n  to = recorder_thing.a\n  id = \"thing-one\"\n}\n", "ImportResourceState", "import", "resource.type == 'recorder_thing' && planned.id == 'thing-one'"},
		{"move", head + strings.Replace(thing, "recorder_thing", "recorder_old", 1), head + thing + "moved {\n  from = recorder_old.a\n  to   = recorder_thing.a\n}\n",
			"MoveResourceState", "move", "resource.source_type == 'recorder_old' && prior.name == 'one' && planned.name == 'one'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := "audit {\n  path = \"audit.jsonl\"\n}\n"
			cfg, env := middlewareDir(t, bin, audit)
			if tc.setup != "" {
				writeFile(t, filepath.Join(cfg, "main.tf"), tc.setup)
				mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			}
			writeFile(t, filepath.Join(cfg, "main.tf"), tc.tf)
			// Without a rule: the call goes through, audited with its action.
			plan := []string{"run", "-C", cfg, "--", bin, "plan", "-input=false", "-no-color"}
			mustOprov(t, env, plan...)
			if !auditHas(t, cfg, tc.rpc, tc.action, false) {
				t.Fatalf("no audit line for %s with action %q", tc.rpc, tc.action)
			}
			// With a deny rule on it: stopped, and the audit says which rule.
			writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/recorder\" {\n  source = \"./recorder\"\n}\n"+audit+
				"rule \"stop\" {\n  deny    = \"action == '"+tc.action+"' && "+tc.rule+"\"\n  message = \"stopped by the test\"\n}\n")
			r := oprov(t, env, plan...)
			if out := r.Stdout + r.Stderr; r.Code == 0 || !strings.Contains(out, `"stop" denies `+tc.action) {
				t.Fatalf("not denied (exit %d):\n%s", r.Code, out)
			}
			if !auditHas(t, cfg, tc.rpc, tc.action, true) {
				t.Errorf("no audit line for %s with action %q and the rule that denied it", tc.rpc, tc.action)
			}
		})
	}
}

// auditHas reports whether the audit has a line for rpc with action (and, with denied, the rule
// "stop" recorded on it).
func auditHas(t *testing.T, cfg, rpc, action string, denied bool) bool {
	t.Helper()
	for _, a := range readAuditLines(t, filepath.Join(cfg, "audit.jsonl")) {
		if a.RPC == rpc && a.Action == action && (!denied || len(a.Policy) == 1 && a.Policy[0].Rule == "stop") {
			return true
		}
	}
	return false
}

// stateObject gives recorder_thing.a's attributes and private data from terraform.tfstate.
func stateObject(t *testing.T, cfg string) (attrs, private string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cfg, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Resources []struct {
			Type      string
			Instances []struct {
				Attributes json.RawMessage `json:"attributes"`
				Private    string          `json:"private"`
			}
		}
	}
	decodeJSON(t, string(data), &st)
	for _, r := range st.Resources {
		if r.Type == "recorder_thing" && len(r.Instances) == 1 {
			return string(r.Instances[0].Attributes), r.Instances[0].Private
		}
	}
	t.Fatalf("no recorder_thing in the state:\n%s", data)
	return "", ""
}

// After a denied change, the object's state and private data are as they were.
func TestMiddlewarePrivateKept(t *testing.T) {
	bin := peers.Require(t, "tofu")
	cfg, env := middlewareDir(t, bin, "")
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(recorderConfig(false), `owner = "platform"`, `owner = "platform", cost = "a"`, 1))
	mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
	attrs, private := stateObject(t, cfg)
	if private == "" {
		t.Fatal("the recorder keeps private data: the state has none")
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(recorderConfig(false), `owner = "platform"`, `owner = "platform", cost = "b"`, 1))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/recorder\" {\n  source = \"./recorder\"\n}\n"+
		"rule \"frozen\" {\n  deny = \"action == 'update' && planned.tags.cost == 'b'\"\n}\n")
	r := oprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "frozen") {
		t.Fatalf("the update was not denied (exit %d):\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if a2, p2 := stateObject(t, cfg); a2 != attrs || p2 != private {
		t.Errorf("a denied update changed the state:\nbefore %s %q\nafter  %s %q", attrs, private, a2, p2)
	}
}

// Nothing is dropped from the audit: a number JSON cannot hold is written as a marked string;
// an audit that cannot be written fails the run, unless on_error = "continue".
func TestMiddlewareAuditNothingDropped(t *testing.T) {
	bin := peers.Require(t, "tofu")
	tf := strings.Replace(stackConfig("dev-db"), "value = 3", "value = 1e400", 1)
	cfg, env := middlewareDir(t, bin, "audit {\n  path   = \"audit.jsonl\"\n  values = true\n}\n")
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	r := mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
	data, _ := os.ReadFile(filepath.Join(cfg, "audit.jsonl"))
	applies := 0
	for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
		if strings.Contains(sc.Text(), `"rpc":"ApplyResourceChange"`) {
			applies++
			if !strings.Contains(sc.Text(), `(unencodable) 1e+400`) {
				t.Errorf("the apply's line lacks the marked number: %s", sc.Text())
			}
		}
	}
	if applies != 1 || strings.Contains(r.Stderr, "warning") {
		t.Errorf("%d ApplyResourceChange lines, want 1; stderr:\n%s", applies, r.Stderr)
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to stand for an audit that cannot be written")
	}
	for _, onError := range []string{"", "continue"} {
		t.Run("on_error="+onError, func(t *testing.T) {
			extra := "audit {\n  path = \"/dev/full\"\n"
			if onError != "" {
				extra += "  on_error = \"" + onError + "\"\n"
			}
			cfg, env := middlewareDir(t, bin, extra+"}\n")
			r := oprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			served := servedCalls(t, cfg)
			if onError == "" {
				if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "audit trail cannot be written") || served["ApplyResourceChange"] != 0 {
					t.Errorf("an unwritable audit must fail the run before any change (exit %d, served %s):\n%s%s", r.Code, sortedCounts(served), r.Stdout, r.Stderr)
				}
				return
			}
			if r.Code != 0 || !strings.Contains(r.Stderr, "warning: audit") || served["ApplyResourceChange"] == 0 {
				t.Errorf("on_error = continue: want success with a warning (exit %d, served %s):\n%s%s", r.Code, sortedCounts(served), r.Stdout, r.Stderr)
			}
		})
	}
}

// During oprov run every socket the provider and the proxy listen on is inside a 0700 directory
// that another user cannot get into, and nothing of the run's is left afterwards.
func TestRunSocketsPrivate(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("needs Linux's /proc and root, to drop to user nobody")
	}
	bin := peers.Require(t, "tofu")
	probeDir := t.TempDir()
	os.Chmod(probeDir, 0o755)
	os.Chmod(filepath.Dir(probeDir), 0o755)
	probe := filepath.Join(probeDir, "sockprobe")
	build := exec.Command("go", "build", "-o", probe, "./tests/testkit/sockprobe")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sockprobe: %v\n%s", err, out)
	}
	os.Chmod(probe, 0o755)
	cfg, env := middlewareDir(t, bin, "audit {\n  path = \"audit.jsonl\"\n}\n")
	// The run's directories are made under TMPDIR: a fresh one shows what is left.
	tmp := t.TempDir()
	env = append(env, "TMPDIR="+tmp)
	mustOprov(t, env, "run", "-C", cfg, "--", bin, "init", "-input=false") // builds the recorder
	r := mustOprov(t, env, "run", "-C", cfg, "--", probe)
	var proxies, providers int
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rep struct {
			P      string `json:"path"`
			O      string `json:"of"`
			D      string `json:"private_dir"`
			Owner  bool   `json:"owner_connects"`
			Nobody bool   `json:"nobody_connects"`
			Dirs   []string
		}
		decodeJSON(t, line, &rep)
		if rep.O == "proxy" {
			proxies++
		} else {
			providers++
		}
		if rep.D == "" || !strings.HasPrefix(rep.D, tmp+"/") {
			t.Errorf("%s socket %s is in no 0700 directory of the run: %v", rep.O, rep.P, rep.Dirs)
		}
		if !rep.Owner || rep.Nobody {
			t.Errorf("%s socket %s: the owner connects %v, nobody connects %v (want true, false)", rep.O, rep.P, rep.Owner, rep.Nobody)
		}
	}
	if proxies != 1 || providers < 1 {
		t.Errorf("probed %d proxy and %d provider sockets, want 1 and at least 1:\n%s", proxies, providers, r.Stdout)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR after the run: %v", names)
	}
}

// The sweep beside a lock file removes only what oprov can tell it made: a user's
// .oprov-tmp-notes and .oprov-tmp-mine/ survive oprov lock, and a killed writer's leftovers (a
// temporary file that was its own lock, an owner directory with its lock file) are removed.
func TestSweepSparesUsersFiles(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	mine := map[string]bool{".oprov-tmp-notes": false, ".oprov-tmp-mine": true}
	for name, dir := range mine {
		if dir {
			writeFile(t, filepath.Join(f.cfg, name, "draft.txt"), "mine")
		} else {
			writeFile(t, filepath.Join(f.cfg, name), "my notes")
		}
	}
	// What a killed oprov leaves: nobody holds these files' locks any more.
	killed := []string{".oprov-tmp-99999-0123456789abcdef..terraform.lock.hcl", ".oprov-tmp-99999-fedcba9876543210.lock", ".oprov-tmp-99999-fedcba9876543210"}
	writeFile(t, filepath.Join(f.cfg, killed[0]), "half a lock file")
	writeFile(t, filepath.Join(f.cfg, killed[1]), "")
	writeFile(t, filepath.Join(f.cfg, killed[2], "partial"), "x")
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	for name := range mine {
		if _, err := os.Stat(filepath.Join(f.cfg, name)); err != nil {
			t.Errorf("oprov lock removed the user's %s: %v", name, err)
		}
	}
	for _, name := range killed {
		if _, err := os.Stat(filepath.Join(f.cfg, name)); !os.IsNotExist(err) {
			t.Errorf("a killed writer's %s is still there: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.cfg, ".terraform.lock.hcl")); err != nil {
		t.Errorf("no lock file written: %v", err)
	}
}
