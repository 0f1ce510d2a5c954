package recording

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The writer holds lines in a buffer, but what it writes is every line, once Close puts the file
// in place; calls of one key (one call, type and request) in the order their answers came.
func TestWriterKeepsEveryLineInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	w, err := Create(path, "tofu", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000 // several times the buffer
	for i := 0; i < n; i++ {
		if err := w.put(&Line{Provider: "example.com/acme/x", Call: "ReadResource", Type: "thing", Response: Msg{"note": fmt.Sprintf("%d_%s", i, strings.Repeat("x", i%300))}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the recording is in place before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for ; sc.Scan(); lines++ {
		if want := fmt.Sprintf(`"note":"%d_`, lines-1); lines > 0 && !strings.Contains(sc.Text(), want) {
			t.Fatalf("line %d is not call %d: %.80s", lines+1, lines-1, sc.Text())
		}
	}
	if lines != n+1 {
		t.Fatalf("%d lines, want the header and %d calls", lines, n)
	}
}

// A line that cannot be written fails the run: the call that meets the failure and every one
// after it get the error, Close gives it, and neither the recording nor its temporary file is
// left behind. The buffer only moves when the failure is met: a short run meets it at Close.
func TestWriterFailureFailsTheRun(t *testing.T) {
	for _, lines := range []int{1, 5000} {
		dir := t.TempDir()
		path := filepath.Join(dir, "calls.jsonl")
		w, err := Create(path, "tofu", nil)
		if err != nil {
			t.Fatal(err)
		}
		w.f.Close() // every write to the file fails from now on (as a full disk would)
		var failed error
		for i := 0; i < lines; i++ {
			err := w.put(&Line{Provider: "example.com/acme/x", Call: "ReadResource", Type: strings.Repeat("t", 200)})
			if failed != nil && err == nil {
				t.Fatalf("%d lines: line %d was taken after a write failed (%v)", lines, i, failed)
			}
			if err != nil {
				failed = err
			}
		}
		if lines > 1000 && failed == nil {
			t.Errorf("%d lines: no call met the failed write", lines)
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "recording "+path) {
			t.Errorf("%d lines: Close gave %v, want the write's failure naming the recording", lines, err)
		}
		left, _ := os.ReadDir(dir)
		if len(left) > 0 {
			t.Errorf("%d lines: left behind %v", lines, left[0].Name())
		}
	}
}

// Calls answered in another order (tofu makes them concurrently) are written in one order: the
// header, each provider with its line and then its calls by call, type and request.
func TestWriterOrdersLinesWhateverTheAnswersOrder(t *testing.T) {
	write := func(order []int) []byte {
		path := filepath.Join(t.TempDir(), "calls.jsonl")
		w, err := Create(path, "tofu", nil)
		if err != nil {
			t.Fatal(err)
		}
		lines := []*Line{
			{Provider: "example.com/acme/b", Version: "1.0.0"},
			{Provider: "example.com/acme/a", Version: "1.0.0"},
			{Provider: "example.com/acme/b", Call: "ReadResource", Type: "b_thing", Request: Msg{"type_name": "b_thing"}},
			{Provider: "example.com/acme/a", Call: "PlanResourceChange", Type: "a_thing", Request: Msg{"type_name": "a_thing", "n": 1}},
			{Provider: "example.com/acme/a", Call: "PlanResourceChange", Type: "a_thing", Request: Msg{"type_name": "a_thing", "n": 2}},
			{Provider: "example.com/acme/a", Call: "ApplyResourceChange", Type: "a_thing", Request: Msg{"type_name": "a_thing"}},
		}
		for _, i := range order {
			if err := w.put(lines[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if dir, _ := os.ReadDir(filepath.Dir(path)); len(dir) != 1 {
			t.Errorf("Close left %d files beside the recording", len(dir)-1)
		}
		_, rest, _ := strings.Cut(string(b), "\n") // the header holds the time
		return []byte(rest)
	}
	a := write([]int{0, 1, 2, 3, 4, 5})
	b := write([]int{1, 5, 4, 0, 3, 2})
	if string(a) != string(b) {
		t.Fatalf("two orders of the same answers wrote different recordings:\n%s\n%s", a, b)
	}
	if first, _, _ := strings.Cut(string(a), "\n"); !strings.Contains(first, `"provider":"example.com/acme/a","version"`) {
		t.Errorf("the first line after the header is not provider a's: %s", first)
	}
}
