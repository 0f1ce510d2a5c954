package loader

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/plugin"
)

// fakeProgramEnv, set, makes this test binary stand for tofu (see TestMain): no tofu is needed
// to test what the loader does around the program it runs.
const fakeProgramEnv = "OPROV_TEST_FAKE_PROGRAM"

// fakeProgram is the stand-in tofu: `version -json` answers as tofu does (unless the variable
// says "badjson"); anything else prints the reattach variable the group handed it and exits 3.
func fakeProgram(args []string) int {
	if len(args) == 2 && args[0] == "version" && args[1] == "-json" {
		if os.Getenv(fakeProgramEnv) == "badjson" {
			fmt.Println("not json")
			return 0
		}
		fmt.Println(`{"terraform_version":"1.12.0","platform":"linux_amd64"}`)
		return 0
	}
	fmt.Println("args:", strings.Join(args, " "))
	fmt.Println("reattach:", os.Getenv("TF_REATTACH_PROVIDERS"))
	return 3
}

// The recording names the program with the version it reports; a program that cannot say or
// says it in no JSON is named by its file name alone.
func TestProgramVersion(t *testing.T) {
	t.Setenv(fakeProgramEnv, "1")
	name := filepath.Base(os.Args[0])
	if got := programVersion(os.Args[0]); got != name+" 1.12.0" {
		t.Errorf("programVersion = %q, want %q", got, name+" 1.12.0")
	}
	t.Setenv(fakeProgramEnv, "badjson")
	if got := programVersion(os.Args[0]); got != name {
		t.Errorf("a program answering no JSON: %q, want %q", got, name)
	}
	missing := filepath.Join(t.TempDir(), "tofu")
	if got := programVersion(missing); got != "tofu" {
		t.Errorf("a missing program: %q, want tofu", got)
	}
}

// writeRecording writes a recording of example.com/acme/hello at version with no calls.
func writeRecording(t *testing.T, dir, version string) string {
	t.Helper()
	text := `{"oprov_recording":2,"program":"tofu 1.12.0"}
{"provider":"example.com/acme/hello","version":"` + version + `","protocol":6,"schema":{"provider":{"version":0,"block":{"description_kind":"plain"}}},"schema_wire":"CgISAA=="}
`
	path := filepath.Join(dir, "rec.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Replay starts no provider: the program runs in the configuration directory with the
// recording's stand-in handed to it by the reattach variable, its exit code is given back, and
// -v names what is replayed from where. A missing or unreadable recording is an error naming it.
func TestReplayRunsProgramAgainstStandIn(t *testing.T) {
	t.Setenv(fakeProgramEnv, "1")
	t.Setenv("OPROV_STATE_DIR", t.TempDir())
	t.Setenv("OPROV_RECORDING_KEY", "")
	dir := t.TempDir()
	rec := writeRecording(t, dir, "1.0.0")
	var out, errb bytes.Buffer
	p := &Project{Dir: dir, Config: &config.Config{}}
	ro := RunOptions{Program: os.Args[0], Args: []string{"plan", "-input=false"}, Replay: rec, Verbose: true,
		Streams: Streams{In: strings.NewReader(""), Out: &out, Err: &errb}}
	code, err := p.Run(context.Background(), Options{}, ro)
	if err != nil {
		t.Fatalf("replay: %v\nstderr: %s", err, errb.String())
	}
	if code != 3 {
		t.Errorf("exit code %d, want the program's 3", code)
	}
	if !strings.Contains(out.String(), "args: plan -input=false") {
		t.Errorf("the program did not get its arguments:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `reattach: {"example.com/acme/hello"`) {
		t.Errorf("the program was not handed the stand-in:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "replaying example.com/acme/hello from "+rec) {
		t.Errorf("-v does not say what is replayed: %q", errb.String())
	}

	ro.Replay = filepath.Join(dir, "missing.jsonl")
	if _, err := p.Run(context.Background(), Options{}, ro); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("a missing recording: %v", err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("not a recording\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ro.Replay = bad
	if _, err := p.Run(context.Background(), Options{}, ro); err == nil {
		t.Errorf("a file that is no recording was replayed")
	}
	ro.Replay, ro.Program = rec, filepath.Join(dir, "no-such-tofu")
	if _, err := p.Run(context.Background(), Options{}, ro); err == nil || !strings.Contains(err.Error(), "no-such-tofu") {
		t.Errorf("a missing program: %v", err)
	}
}

// withRecording creates the recording (named after the program's version) and puts a recorder
// in front of each member, keeping the member's own middleware inside it; Abort leaves no file.
func TestWithRecordingWrapsMembers(t *testing.T) {
	t.Setenv(fakeProgramEnv, "1")
	t.Setenv("OPROV_STATE_DIR", t.TempDir())
	t.Setenv("OPROV_RECORDING_KEY", "")
	dir := t.TempDir()
	called := false
	members := []plugin.Member{{Addr: "example.com/acme/hello"}, {Addr: "example.com/acme/other", Middleware: func(*plugin.Provider) (plugin.Middleware, error) {
		called = true
		return nil, fmt.Errorf("inner refused")
	}}}
	ls := []Launchable{{Addr: "example.com/acme/hello", Version: "1.0.0"}, {Addr: "example.com/acme/other", Version: "2.0.0"}}
	w, err := withRecording(context.Background(), members, ls, RunOptions{Program: os.Args[0], Record: filepath.Join(dir, "rec.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Middleware == nil {
			t.Errorf("%s has no recorder", m.Addr)
		}
	}
	if _, err := members[1].Middleware(nil); err == nil || !called {
		t.Errorf("the member's own middleware was not kept inside the recorder: %v", err)
	}
	w.Abort()
	if _, err := os.Stat(filepath.Join(dir, "rec.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an aborted recording left its file: %v", err)
	}
	if _, err := withRecording(context.Background(), nil, nil, RunOptions{Program: os.Args[0], Record: filepath.Join(dir, "no", "dir", "rec.jsonl")}); err == nil {
		t.Errorf("a recording in a missing directory was created")
	}
}
