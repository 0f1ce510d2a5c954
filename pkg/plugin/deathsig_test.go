package plugin

import (
	"context"
	"os"
	"strconv"
)

// deathParent, run as the test binary with OPROV_TEST_DEATH_PARENT=FILE, starts the test binary
// as a provider (DieWithParent when OPROV_TEST_DEATH_SIG is set), writes its pid to FILE and waits
// to be killed.
func deathParent(pidFile string) {
	exe, err := os.Executable()
	if err != nil {
		os.Exit(3)
	}
	opts := Options{Path: exe, Env: []string{"OPROV_TEST_SERVE_PROVIDER=1", "OPROV_TEST_DEATH_PARENT="},
		ForReattach: true, DieWithParent: os.Getenv("OPROV_TEST_DEATH_SIG") != ""}
	p, err := Start(context.Background(), opts)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(4)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o600); err != nil {
		os.Exit(5)
	}
	select {}
}
