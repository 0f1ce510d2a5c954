package plugin

import (
	"context"
	"runtime"
	"testing"
)

// While a proxy serves, oprov runs on half the cores (proxyProcs); the setting comes back when
// the last group with a proxy stops, and one the user set (GOMAXPROCS) is never changed. A group
// without a proxy changes nothing.
func TestProxyHoldsOprovToFewerCores(t *testing.T) {
	if proxyProcs() >= runtime.NumCPU() {
		t.Skip("one core: nothing to hold")
	}
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(runtime.NumCPU())
	defer runtime.GOMAXPROCS(before)
	all := runtime.NumCPU()
	direct, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/echo", Options: selfAsProvider(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != all {
		t.Errorf("a group without a proxy: GOMAXPROCS %d, want %d", got, all)
	}
	_, stop1 := startProxied(t, nopMiddleware{})
	_, stop2 := startProxied(t, nopMiddleware{})
	if got := runtime.GOMAXPROCS(0); got != proxyProcs() {
		t.Errorf("two groups with a proxy: GOMAXPROCS %d, want %d", got, proxyProcs())
	}
	stop1()
	if got := runtime.GOMAXPROCS(0); got != proxyProcs() {
		t.Errorf("one group with a proxy still running: GOMAXPROCS %d, want %d", got, proxyProcs())
	}
	stop2()
	direct.Stop()
	if got := runtime.GOMAXPROCS(0); got != all {
		t.Errorf("after the last proxy stopped: GOMAXPROCS %d, want %d back", got, all)
	}
	t.Setenv("GOMAXPROCS", "2")
	_, stop3 := startProxied(t, nopMiddleware{})
	defer stop3()
	if got := runtime.GOMAXPROCS(0); got != all {
		t.Errorf("the user set GOMAXPROCS: it became %d, want %d kept", got, all)
	}
}
