package sandbox

import (
	"strings"
	"testing"
)

func TestPlanFailsClosed(t *testing.T) {
	spec := Spec{Name: `"*" at oprov.hcl:3`}
	full := Support{OS: "linux", LandlockABI: 7, Seccomp: true, NoNewPrivs: true}
	got, err := Plan(spec, full)
	if err != nil || got.ABI != 7 || !got.Seccomp || len(got.Dropped) != 0 {
		t.Fatalf("a full kernel: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		sup     Support
		missing []string
	}{
		{Support{OS: "linux", LandlockABI: 0, Seccomp: true, NoNewPrivs: true}, []string{"file system rules", "TCP connect", "scoping"}},
		{Support{OS: "linux", LandlockABI: 3, Seccomp: true, NoNewPrivs: true}, []string{"TCP connect and bind rules (needs Landlock ABI 4)"}},
		{Support{OS: "linux", LandlockABI: 5, Seccomp: true, NoNewPrivs: true}, []string{"scoping (needs Landlock ABI 6)"}},
		{Support{OS: "linux", LandlockABI: 7, Seccomp: false, NoNewPrivs: true}, []string{"system call filter"}},
		{Support{OS: "darwin"}, []string{"file system rules", "resource limits"}},
	} {
		_, err := Plan(spec, tc.sup)
		if err == nil {
			t.Errorf("%+v: planned without error", tc.sup)
			continue
		}
		for _, want := range append(tc.missing, "best_effort = true", `"*" at oprov.hcl:3`, "not started") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%+v: the refusal does not say %q: %v", tc.sup, want, err)
			}
		}
		weak := spec
		weak.BestEffort = true
		got, err := Plan(weak, tc.sup)
		if err != nil || len(got.Dropped) == 0 || got.ABI != tc.sup.LandlockABI {
			t.Errorf("%+v with best_effort: %+v, %v", tc.sup, got, err)
		}
		if !strings.Contains(got.Describe(), "best_effort dropped: ") {
			t.Errorf("the description does not say what was dropped: %s", got.Describe())
		}
	}
}

func TestFilterEnv(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/h", "AWS_SECRET=x", "AWS_REGION=y", "LC_ALL=C", "TOKEN=t", "TOKENX=u", "A=b=c"}
	got := strings.Join(FilterEnv(env, []string{"PATH", "LC_*", "TOKEN", "A"}), " ")
	if got != "PATH=/bin LC_ALL=C TOKEN=t A=b=c" {
		t.Errorf("FilterEnv: %s", got)
	}
	if got := FilterEnv(env, nil); len(got) != 0 {
		t.Errorf("no names pass nothing through: %v", got)
	}
}

func TestSuggest(t *testing.T) {
	for msg, want := range map[string]string{
		"refused: open /home/u/.aws/credentials: permission denied":                  `read = ["/home/u/.aws/credentials"]`,
		"PermissionError: [Errno 13] Permission denied: '/srv/data/x.json'":          `read = ["/srv/data/x.json"]`,
		"dial tcp 10.0.0.1:8443: connect: permission denied":                         `connect = [8443]`,
		`Error: fork/exec /usr/bin/git: permission denied`:                           `execute = ["/usr/bin/git"]`,
		"mkdir /var/cache/acme: permission denied":                                   `write = ["/var/cache"]`,
		"[Errno 1] Operation not permitted: '/etc/acme.conf'":                        `read = ["/etc/acme.conf"]`,
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
