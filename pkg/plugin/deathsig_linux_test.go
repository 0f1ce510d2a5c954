package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A provider started with DieWithParent does not outlive a parent killed by SIGKILL (a far side
// killed outright); without it, it does, which is what the option is for.
func TestDieWithParent(t *testing.T) {
	for _, withSig := range []bool{true, false} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "OPROV_TEST_DEATH_PARENT="+pidFile)
		if withSig {
			cmd.Env = append(cmd.Env, "OPROV_TEST_DEATH_SIG=1")
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var pid int
		for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				pid, _ = strconv.Atoi(string(b))
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("the parent did not start its provider: %s", stderr.String())
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		gone := false
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			// The provider is reparented and reaped by init (or a subreaper) once it dies; a
			// zombie counts as gone.
			st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil || strings.Contains(string(st), ") Z ") {
				gone = true
				break
			}
		}
		if !gone {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		if withSig && !gone {
			t.Errorf("the provider (pid %d) outlived its parent killed by SIGKILL", pid)
		}
		if !withSig && gone {
			t.Errorf("without DieWithParent the provider died with its parent too: the test shows nothing")
		}
		if !withSig && !gone {
			t.Logf("without DieWithParent the provider outlived its parent, as expected")
		}
	}
}
