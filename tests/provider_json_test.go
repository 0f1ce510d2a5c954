package tests

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// jsonAnswer is one answer line of provider check --json.
type jsonAnswer struct {
	Call, Type, Error string
	OK                bool
	State             map[string]any
	Result            any
}

// driveJSON runs provider check --json TARGET with lines on stdin and gives the answers; target
// may be followed by flags, split at spaces.
func driveJSON(t *testing.T, env []string, target string, lines ...string) []jsonAnswer {
	t.Helper()
	cmd := exec.Command(oprovBin, append([]string{"provider", "check", "--json"}, strings.Fields(target)...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, _ := cmd.Output()
	var answers []jsonAnswer
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a jsonAnswer
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("answer line %q: %v\nstderr: %s", l, err, errb.String())
		}
		answers = append(answers, a)
	}
	if len(answers) != len(lines) {
		t.Fatalf("%d answers to %d calls:\n%s\nstderr: %s", len(answers), len(lines), out, errb.String())
	}
	return answers
}

// expectAnswers checks each answer: ok, and its state (or result) holds want[i] as text.
func expectAnswers(t *testing.T, answers []jsonAnswer, want ...string) {
	t.Helper()
	for i, a := range answers {
		got, _ := json.Marshal(map[string]any{"state": a.State, "result": a.Result, "error": a.Error})
		if want[i] == "" && a.OK || want[i] != "" && strings.Contains(string(got), want[i]) && (a.OK || strings.HasPrefix(want[i], "missing")) {
			continue
		}
		t.Errorf("call %d (%s %s): ok=%v %s, want %q", i+1, a.Call, a.Type, a.OK, got, want[i])
	}
}

// listing is every file below dir, to show that driving a provider writes nothing there.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			info, _ := d.Info()
			out = append(out, p+" "+info.ModTime().String())
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// provider check --json drives an OCI provider, a Go source provider and a stdio provider through
// create, read, update, delete and import with no tofu; a missing required attribute is named.
func TestProviderJSONMode(t *testing.T) {
	t.Run("OCI", func(t *testing.T) {
		f := newLoaderFixture(t, helloConfig)
		st := `{"id":"greeting-a","name":"a","message":"Hi, a!","delay":null}`
		answers := driveJSON(t, f.env, f.repo+":1.0.0",
			`{"call":"configure","config":{"greeting":"Hi"}}`,
			`{"call":"create","type":"hello_greeting","config":{"name":"a"}}`,
			`{"call":"read","type":"hello_greeting","state":`+st+`}`,
			`{"call":"update","type":"hello_greeting","config":{"name":"a","delay":"1ms"},"state":`+st+`}`,
			`{"call":"import","type":"hello_greeting","id":"greeting-b"}`,
			`{"call":"delete","type":"hello_greeting","state":`+st+`}`,
			`{"call":"data","type":"hello_greeting","config":{"name":"c"}}`,
			`{"call":"function","type":"greet","args":["d"]}`,
			`{"call":"create","type":"hello_greeting","config":{}}`)
		expectAnswers(t, answers, "", `"Hi, a!"`, `"Hi, a!"`, `"1ms"`, `"Hi, b!"`, "", `"Hi, c!"`, `"Hello, d!"`, `missing required attribute \"name\"`)
	})
	t.Run("Go source", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "recorder")
		copyDir(t, filepath.Join(repoRoot, "tests", "providers", "recorder"), dir)
		before := listing(t, dir)
		env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "HOME=" + t.TempDir()}
		st := `{"id":"thing-x","name":"x","tags":null,"secret":null}`
		answers := driveJSON(t, env, dir,
			`{"call":"create","type":"recorder_thing","config":{"name":"x"}}`,
			`{"call":"read","type":"recorder_thing","state":`+st+`}`,
			`{"call":"update","type":"recorder_thing","config":{"name":"x","tags":{"k":"v"}},"state":`+st+`}`,
			`{"call":"import","type":"recorder_thing","id":"thing-y"}`,
			`{"call":"delete","type":"recorder_thing","state":`+st+`}`)
		expectAnswers(t, answers, `"thing-x"`, `"thing-x"`, `"k":"v"`, `"thing-y"`, "")
		if after := listing(t, dir); after != before {
			t.Errorf("driving the provider wrote into its directory:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "kv")
		copyDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), dir)
		before := listing(t, dir)
		db := filepath.Join(t.TempDir(), "kv.json")
		writeFile(t, db, `{"seed": {"value": "planted", "revision": 7}}`)
		env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "HOME=" + t.TempDir()}
		st := `{"id":"kv:a","key":"a","value":"one","revision":1}`
		answers := driveJSON(t, env, dir,
			`{"call":"configure","config":{}}`,
			`{"call":"configure","config":{"path":"`+db+`"}}`,
			`{"call":"create","type":"kv_entry","config":{"key":"a","value":"one"}}`,
			`{"call":"read","type":"kv_entry","state":`+st+`}`,
			`{"call":"update","type":"kv_entry","config":{"key":"a","value":"two"},"state":`+st+`}`,
			`{"call":"import","type":"kv_entry","id":"seed"}`,
			`{"call":"delete","type":"kv_entry","state":{"id":"kv:a","key":"a","value":"two","revision":2}}`,
			`{"call":"function","type":"entry_id","args":["zz"]}`)
		expectAnswers(t, answers, `missing required attribute \"path\"`, "", `"revision":1`, `"value":"one"`, `"revision":2`, `"planted"`, "", `"kv:zz"`)
		if data, _ := os.ReadFile(db); strings.Contains(string(data), `"a"`) {
			t.Errorf("after delete the database still holds a: %s", data)
		}
		if after := listing(t, dir); after != before {
			t.Errorf("driving the provider wrote into its directory:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}
