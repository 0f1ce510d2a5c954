package hint

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	for msg, want := range map[string]string{
		"refused: open /home/u/.aws/credentials: permission denied":                  `read = ["/home/u/.aws/credentials"]`,
		"PermissionError: [Errno 13] Permission denied: '/srv/data/x.json'":          `read = ["/srv/data/x.json"]`,
		"dial tcp 10.0.0.1:8443: connect: permission denied":                         `connect = [8443]`,
		`Error: fork/exec /usr/bin/git: permission denied`:                           `execute = ["/usr/bin/git"]`,
		"mkdir /var/cache/acme: permission denied":                                   `write = ["/var/cache"]`,
		"[Errno 1] Operation not permitted: '/etc/acme.conf'":                        `read = ["/etc/acme.conf"]`,
		"open /srv/${x}/%{y}: permission denied":                                     `read = ["/srv/$${x}/%%{y}"]`,
		"ptrace: operation not permitted":                                            "seccomp",
		"the provider is fine":                                                       "",
		"connection refused":                                                         "",
		"2026-01-01T00:00:00Z [INFO] wrote /tmp/x in 3s":                             "",
		"Error: reading /etc/x: open /etc/x: permission denied (is the file there?)": `read = ["/etc/x"]`,
	} {
		s, ok := Suggest(msg)
		if ok != (want != "") || !strings.Contains(s, want) {
			t.Errorf("Suggest(%q) = %q, %v; want one with %q", msg, s, ok, want)
		}
	}
}

func FuzzSuggest(f *testing.F) {
	f.Add("open /x: permission denied")
	f.Add("dial tcp 1.2.3.4:99: connect: permission denied")
	f.Add("[Errno 13] Permission denied: '/q'")
	f.Fuzz(func(t *testing.T, msg string) {
		s, ok := Suggest(msg)
		if ok != (s != "") {
			t.Fatalf("Suggest(%q) = %q, %v", msg, s, ok)
		}
		h := &LineHinter{Hint: func(string) {}}
		h.Write([]byte(msg))
	})
}
func TestLineHinterOncePerSuggestion(t *testing.T) {
	var got []string
	h := &LineHinter{Hint: func(s string) { got = append(got, s) }}
	h.Write([]byte("open /a: permission denied\nopen /a: permiss"))
	h.Write([]byte("ion denied\nfine\nopen /b: permission denied"))
	if len(got) != 1 || !strings.Contains(got[0], "/a") {
		t.Errorf("hints: %q (the partial last line waits for its newline; a repeat is said once)", got)
	}
	h.Write([]byte("\n"))
	if len(got) != 2 || !strings.Contains(got[1], "/b") {
		t.Errorf("hints: %q", got)
	}
}

// TestSuggestInReadsRelativePaths: a Python provider given a relative path (${path.module}/kv.json
// is ./kv.json) reports it relative; the suggestion names it against the working directory.
func TestSuggestInReadsRelativePaths(t *testing.T) {
	msg := "PermissionError: [Errno 13] Permission denied: './kv.json.tmp'"
	if s, ok := SuggestIn(msg, "/srv/infra"); !ok || !strings.Contains(s, `read = ["/srv/infra/kv.json.tmp"]`) || !strings.Contains(s, `write = ["/srv/infra"]`) {
		t.Errorf("SuggestIn(%q) = %q, %v", msg, s, ok)
	}
	var got []string
	h := &LineHinter{Hint: func(s string) { got = append(got, s) }, Dir: "/srv/infra"}
	h.Write([]byte(msg + "\n"))
	if len(got) != 1 {
		t.Errorf("LineHinter with a working directory: %q", got)
	}
}
