package recording

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A file given where a provider to run goes is sniffed by its first bytes, then by its name;
// nothing else (a directory, a missing path, a script) looks like a recording.
func TestSniffTellsARecordingFromAProvider(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path string
		want Sniffed
	}{
		{write("rec", "\n  "+headerPrefix+`{"version":1}}`+"\n"), RecordingFile},
		{write("calls.JSONL", "#!/bin/sh\necho hi\n"), RecordingName},
		{write("provider", "#!/bin/sh\necho hi\n"), NotRecording},
		{dir, NotRecording},
		{filepath.Join(dir, "missing.jsonl"), NotRecording},
	} {
		if got := Sniff(c.path); got != c.want {
			t.Errorf("Sniff(%s) = %d, want %d", filepath.Base(c.path), got, c.want)
		}
	}
}

// What the user named that is not a recording is an InputError (the command makes it a usage
// error, exit 2), and its message is the one open gives.
func TestOpenDriverRefusesWhatIsNotARecordingAsInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDriver(p, "", Limits{})
	var bad *InputError
	if !errors.As(err, &bad) {
		t.Fatalf("OpenDriver of a script: %v (%T), want an *InputError", err, err)
	}
	if _, oerr := open(p, Limits{}); oerr == nil || err.Error() != oerr.Error() {
		t.Fatalf("message %q, want open's %q", err, oerr)
	}
	if _, err := OpenDriver(t.TempDir(), "", Limits{}); !errors.As(err, &bad) {
		t.Fatalf("OpenDriver of a directory: %v, want an *InputError", err)
	}
}
