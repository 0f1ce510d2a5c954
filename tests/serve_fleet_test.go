package tests

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// countingProxy forwards TCP connections to a target and counts the bytes the target sends back:
// what one replica read from the registry.
type countingProxy struct {
	Addr string
	down atomic.Int64
}

func startCountingProxy(t testing.TB, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{Addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, countReader{up, &p.down})
			}()
		}
	}()
	return p
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// haproxyFront runs HAProxy in front of servers (HOST:PORT, HTTPS), passing TLS through and
// health-checking GET /healthz over TLS every 300 ms; it gives the address clients use.
func haproxyFront(t testing.TB, addr string, servers []string) {
	t.Helper()
	bin := peers.Require(t, "haproxy")
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 5m
  timeout server 5m
  retries 3
  option redispatch
frontend mirror
  bind %s
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /healthz
  http-check expect status 200
`, addr)
	for i, s := range servers {
		fmt.Fprintf(&b, "  server r%d %s check check-ssl verify none inter 300ms fall 1 rise 1\n", i, s)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeFile(t, cfg, b.String())
	cmd := exec.Command(bin, "-db", "-f", cfg)
	logf, _ := os.Create(filepath.Join(dir, "haproxy.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(filepath.Join(dir, "haproxy.log"))
			t.Fatalf("HAProxy did not listen within 30s:\n%s", data)
		}
	}
}

// vmHWM is a process's peak resident set in MiB.
func vmHWM(pid int) float64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kib / 1024
		}
	}
	return -1
}

// fleet is three replicas sharing one cache directory behind HAProxy, as the README's replicas
// section runs them.
type fleet struct {
	URL      string
	CAFile   string
	replicas []*served
	proxies  []*countingProxy
}

func startFleet(t testing.TB, n int) *fleet {
	t.Helper()
	reg := testreg.Start(t, testreg.Options{})
	pushJSON(t, nil, helloRelease(t), reg.Host+"/providers/acme/hello", "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
	dir := t.TempDir()
	ca := testca.NewCA(t, dir)
	cert, key := ca.Issue(t, dir, "127.0.0.1")
	cache := filepath.Join(dir, "cache") // one cache for every replica
	f := &fleet{CAFile: ca.File}
	// The balancer's address is known before the replicas start (their --url).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	ln.Close()
	var listens []string
	for range n {
		p := startCountingProxy(t, reg.Host)
		s := startServe(t, nil, false, p.Addr+"/providers/${namespace}/${type}", "--ca-file", reg.CAFile,
			"--url", "https://"+front+"/", "--tls-cert", cert, "--tls-key", key,
			"--cache-dir", cache, "--registry-concurrency", "8")
		f.replicas = append(f.replicas, s)
		f.proxies = append(f.proxies, p)
		listens = append(listens, s.Listen)
	}
	haproxyFront(t, front, listens)
	f.URL = "https://" + front + "/"
	// Wait until HAProxy's checks pass.
	c := caClient(t, f.CAFile)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _, err := getWith(c, f.URL, "/healthz"); err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not answer /healthz through HAProxy within 30s")
		}
	}
	return f
}

// TestServeFleet: three replicas sharing one cache directory behind HAProxy; 30 `tofu init`s and
// 300 archive downloads at once; one replica gets SIGTERM in the middle. Every client succeeds,
// each replica reads each zip from the registry at most once, and the replicas' peak RSS is
// printed.
func TestServeFleet(t *testing.T) {
	peak := runFleet(t, 30, 300)
	if peak > 200 {
		t.Errorf("a replica's peak RSS was %.1f MiB, want under 200", peak)
	}
}

// runFleet runs the fleet scenario with inits `tofu init`s and downloads archive downloads at once
// and gives the peak RSS of a replica, in MiB.
func runFleet(t testing.TB, inits, downloads int) float64 {
	tofu := peers.Require(t, "tofu")
	f := startFleet(t, 3)
	var done atomic.Int64
	var failed atomic.Int64
	var mu sync.Mutex
	var firstErrs []string
	fail := func(format string, args ...any) {
		failed.Add(1)
		mu.Lock()
		if len(firstErrs) < 3 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	rc := filepath.Join(t.TempDir(), "mirror.tfrc")
	writeFile(t, rc, `provider_installation {
  network_mirror {
    url = "`+f.URL+`"
  }
}
`)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range inits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := t.TempDir()
			writeFile(t, filepath.Join(work, "main.tf"), `terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}
`)
			out, err := tofuRun(t, tofu, work, []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + f.CAFile, "HOME=" + work}, "init", "-input=false")
			if err != nil {
				fail("tofu init %d: %v\n%s", i, err, out)
			}
			done.Add(1)
		}()
	}
	for i := range downloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := helloPlatforms[i%len(helloPlatforms)]
			c := caClient(t, f.CAFile)
			c.Transport.(*http.Transport).DisableKeepAlives = true
			code, sum, err := getWith(c, f.URL, helloArchive("1.0.0", p))
			if err != nil || code != 200 || "zh:"+sum != helloHashes[p].ZH {
				fail("download %d (%s): %d %s %v", i, p, code, sum, err)
			}
			done.Add(1)
		}()
	}
	// SIGTERM to one replica in the middle: once a tenth of the clients are done.
	victim := f.replicas[1]
	for done.Load() < int64(inits+downloads)/10 && time.Since(start) < 5*time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	victimRSS := vmHWM(victim.cmd.Process.Pid)
	victim.cmd.Process.Signal(syscall.SIGTERM)
	killedAt := done.Load()
	wg.Wait()
	elapsed := time.Since(start)
	if code := victim.wait(t); code != 0 {
		t.Errorf("the replica sent SIGTERM exited %d", code)
	}
	for _, e := range firstErrs {
		t.Error(e)
	}
	if failed.Load() > 0 {
		for i, s := range f.replicas {
			t.Logf("replica %d:\n%s", i, grepLines(s.logText(), `"level":"`, 1000))
		}
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d clients failed", n, inits+downloads)
	}
	var zips int64
	for _, p := range helloPlatforms {
		zips += fileSize(t, filepath.Join(helloRelease(t), "terraform-provider-hello_1.0.0_"+p+".zip"))
	}
	peak := victimRSS
	for i, s := range f.replicas {
		read := f.proxies[i].down.Load()
		// Every zip once at most, plus the small documents (indexes, manifests, signatures).
		if read > zips+(1<<20) {
			t.Errorf("replica %d read %d bytes from the registry: more than each of the zips (%d bytes in all) once", i, read, zips)
		}
		if i != 1 {
			peak = max(peak, vmHWM(s.cmd.Process.Pid))
		}
		t.Logf("replica %d read %d bytes from the registry", i, read)
	}
	fmt.Printf("\nfleet: 3 replicas behind HAProxy, %d tofu inits and %d downloads at once in %v, SIGTERM to one after %d clients; %d failed; peak replica RSS %.1f MiB\n",
		inits, downloads, elapsed.Round(time.Millisecond), killedAt, failed.Load(), peak)
	return peak
}
