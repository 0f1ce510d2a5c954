// Command playground starts what trying oprov needs on one machine, offline: a TLS distribution
// registry and a provider origin (Provider Registry Protocol v1, serving acme/hello 1.0.0 with a
// signed SHA256SUMS) on 127.0.0.1, both under a CA made for the playground. It prints the
// variables to export in another shell, and stops everything (removing what it made) on Ctrl-C.
//
//	go run ./tests/playground              # a fake acme/hello 1.0.0 on the origin
//	go run ./tests/playground -dist dist   # serve a release you packaged instead
//
// It uses the test peers that tests/tools/install.sh builds (the registry; tofu to try installs).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

func main() {
	dist := flag.String("dist", "", "serve this release directory (zips and SHA256SUMS of hello 1.0.0) on the origin instead of a fake one")
	flag.Parse()
	root, err := os.MkdirTemp("", "oprov-playground-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "playground:", err)
		os.Exit(1)
	}
	h := &harness{root: root}
	code := h.run(*dist)
	h.stop()
	os.Exit(code)
}

// run starts the registry and the origin, prints the environment, and waits for a signal. The
// helpers it calls end it through h.fail (a panic this recovers) when something cannot start.
func (h *harness) run(dist string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
			code = 1
		}
	}()
	ca := testreg.NewCA(h, h.TempDir())
	reg := testreg.Start(h, testreg.Options{CA: ca})
	if dist == "" {
		dist = testorigin.FakeRelease(h, "hello", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH, "linux_arm64")
	} else if abs, err := filepath.Abs(dist); err != nil {
		h.Fatal(err)
	} else {
		dist = abs
	}
	org := testorigin.Start(h, ca, dist, "acme", "hello", "1.0.0")
	fmt.Printf(`# oprov playground: paste these into another shell.
export SSL_CERT_FILE=%s   # oprov, tofu and terraform trust the playground's CA
export PATH=%s:$PATH   # the test peers: tofu 1.12, terraform 1.5.7, registry, cosign
export REGISTRY=%s   # a TLS distribution registry
export ORIGIN=%s   # acme/hello 1.0.0 on a provider origin

# then, for example:
#   oprov mirror $ORIGIN --to $REGISTRY/mirror/acme/hello
#   oprov inspect $REGISTRY/mirror/acme/hello:1.0.0
# The playground is running; Ctrl-C stops it and removes %s.
`, ca.File, peers.Dir(), reg.Host, org.Address(), h.root)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return 0
}

// harness is the testing.TB that the test servers want, for a program: failures print and stop,
// temporary directories live under root, and cleanups run at stop. Methods the servers do not use
// are left to the embedded nil interface.
type harness struct {
	testingTB
	root     string
	cleanups []func()
	dirs     int
}

type testingTB = testing.TB

// stopped is what Fatal panics with, for run to recover.
type stopped struct{}

func (h *harness) Helper()          {}
func (h *harness) Name() string     { return "playground" }
func (h *harness) Cleanup(f func()) { h.cleanups = append(h.cleanups, f) }

func (h *harness) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"playground:"}, args...)...)
	panic(stopped{})
}

func (h *harness) Fatalf(format string, args ...any) { h.Fatal(fmt.Sprintf(format, args...)) }
func (h *harness) Skip(args ...any)                  { h.Fatal(args...) }

func (h *harness) TempDir() string {
	h.dirs++
	dir := filepath.Join(h.root, fmt.Sprint(h.dirs))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.Fatal(err)
	}
	return dir
}

// stop runs the cleanups, last first, and removes the playground's directory.
func (h *harness) stop() {
	for i := len(h.cleanups) - 1; i >= 0; i-- {
		h.cleanups[i]()
	}
	if err := os.RemoveAll(h.root); err != nil && !strings.Contains(err.Error(), "no such file") {
		fmt.Fprintln(os.Stderr, "playground:", err)
	}
}
