package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
	"github.com/oprov/oprov/pkg/recording"
)

// runCLIWithInput is runCLI with stdin.
func runCLIWithInput(t *testing.T, in string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &IOStreams{In: strings.NewReader(in), Out: &out, ErrOut: &errb}, args)
	return out.String(), errb.String(), code
}

// markerScript writes, with mode 0755, a shell script at path that creates marker when run.
func markerScript(t *testing.T, path, marker, prefix string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(prefix+"#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantNotRun(t *testing.T, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the file given as a recording was run: %s exists", marker)
	}
}

// A pull request replaces a committed recording with an executable shell script (mode 0755).
// CI drives it with provider check --json, as the recording, or in TARGET's place as the old
// form did. Nothing runs: --recording only ever reads a file, and refuses one without a
// recording's header; a recording's name in TARGET's place is refused, naming --recording. Both
// are usage errors (exit 2).
func TestProviderCheckRunsNoScriptGivenAsARecording(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, name := range []string{"apply.jsonl", "recording"} {
		script := filepath.Join(dir, name)
		markerScript(t, script, marker, "")
		_, stderr, code := runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", "--recording", script)
		if code != 2 || !strings.Contains(stderr, "is not an oprov recording") || !strings.Contains(stderr, "nothing was run") {
			t.Errorf("--recording %s (a script): exit %d, want 2 saying it is not a recording\n%s", name, code, stderr)
		}
		wantNotRun(t, marker)
	}
	script := filepath.Join(dir, "apply.jsonl")
	_, stderr, code := runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", script)
	if code != 2 || !strings.Contains(stderr, "--recording "+script) {
		t.Errorf("a script named as a recording, in TARGET's place: exit %d, want 2 naming --recording\n%s", code, stderr)
	}
	wantNotRun(t, marker)
}

// A file that begins like a recording's header but is none (its second line a shell script, or
// binary after the header's first bytes) is refused with the line that is wrong: never run, and
// in TARGET's place refused, naming --recording.
func TestProviderCheckRefusesAFakeRecordingHeader(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct{ name, prefix, want string }{
		{"header then a script", `{"oprov_recording":2,"program":"tofu 1.12.0"}` + "\n", "line 2"},
		{"header cut short", `{"oprov_recording":` + "\x00\x01\x7fELF", "line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := filepath.Join(dir, "fake")
			markerScript(t, fake, marker, c.prefix)
			_, stderr, code := runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", "--recording", fake)
			if code != 2 || !strings.Contains(stderr, "recording "+fake+", "+c.want) {
				t.Errorf("--recording with a fake header: exit %d, want 2 naming %s\n%s", code, c.want, stderr)
			}
			wantNotRun(t, marker)
			_, stderr, code = runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", fake)
			if code != 2 || !strings.Contains(stderr, "--recording "+fake) {
				t.Errorf("a fake header in TARGET's place: exit %d, want 2 naming --recording\n%s", code, stderr)
			}
			wantNotRun(t, marker)
		})
	}
}

// goodRecording writes a recording of one provider (example.com/x/x, one resource x_thing) and
// no calls, as oprov run --record writes one.
func goodRecording(t *testing.T, path string) {
	t.Helper()
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{
			Attributes: []*tfplugin6.Schema_Attribute{{Name: "name", Type: []byte(`"string"`), Required: true}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(recording.Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"oprov_recording":2,"program":"tofu 1.12.0"}`+"\n"+string(p)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A recording is driven with --recording, and only so: in TARGET's place it is refused with
// the flag to use (a positional TARGET is a provider to run); --recording takes no TARGET beside
// it and needs --json; --address picks a provider the recording holds.
func TestProviderCheckRecordingComesFromTheFlag(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	goodRecording(t, rec)
	out, stderr, code := runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", "--recording", rec)
	if code != 0 || !strings.Contains(out, `"ok":true`) || !strings.Contains(out, "x_thing") {
		t.Errorf("--recording: exit %d\n%s%s", code, out, stderr)
	}
	_, stderr, code = runCLIWithInput(t, `{"call":"schema"}`+"\n", "provider", "check", "--json", rec)
	if code != 2 || !strings.Contains(stderr, "is a recording") || !strings.Contains(stderr, "--recording "+rec) {
		t.Errorf("a recording in TARGET's place: exit %d, want 2 naming --recording\n%s", code, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", "--recording", rec, "./provider"}, "not both"},
		{[]string{"--recording", rec}, "--recording needs --json"},
		{[]string{"--json", "--recording", rec, "--address", "example.com/y/y"}, `no provider "example.com/y/y"; it holds "example.com/x/x"`},
		{[]string{"--json", "--recording", filepath.Join(t.TempDir(), "none")}, "no such file"},
		{[]string{"--json", "--recording", t.TempDir()}, "not a regular file"},
	} {
		_, stderr, code := runCLIWithInput(t, "", append([]string{"provider", "check"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("provider check %s: exit %d, want 2 saying %q\n%s", strings.Join(c.args, " "), code, c.want, stderr)
		}
	}
}
