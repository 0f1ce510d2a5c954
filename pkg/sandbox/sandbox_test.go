package sandbox

import (
	"fmt"
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

func TestWithEnv(t *testing.T) {
	got := withEnv([]string{"HOME=/home/u", "PATH=/bin", "XDG_CACHE_HOMEX=1"}, []string{"HOME=/own", "XDG_CACHE_HOME=/own/.cache"})
	if want := "[PATH=/bin XDG_CACHE_HOMEX=1 HOME=/own XDG_CACHE_HOME=/own/.cache]"; fmt.Sprint(got) != want {
		t.Errorf("withEnv: %v, want %s", got, want)
	}
}
