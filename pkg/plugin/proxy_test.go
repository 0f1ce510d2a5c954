package plugin

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// echoMarker is what the test provider appends to every answer: field 999, varint 42, a field no
// stub of ours knows.
var echoMarker = protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 42)

// echo answers any call with its request and the marker.
// nopMiddleware passes every call on unchanged.
type nopMiddleware struct{}

func (nopMiddleware) Unary(ctx context.Context, c *Call, next Next) ([]byte, error) {
	return next(ctx, c.Request)
}
func (nopMiddleware) Done(string, time.Duration, error) {}
func (nopMiddleware) Own(string, time.Duration, error)  {}

func echo(_ any, stream grpc.ServerStream) error {
	var m rawMsg
	if err := stream.RecvMsg(&m); err != nil {
		return err
	}
	return stream.SendMsg(&rawMsg{b: append(m.b, echoMarker...)})
}

// recorder is a middleware that notes what it saw.
type recorder struct {
	mu    sync.Mutex
	seen  []string
	reqs  [][]byte
	other []string
}

func (r *recorder) Unary(ctx context.Context, c *Call, next Next) ([]byte, error) {
	r.mu.Lock()
	r.seen, r.reqs = append(r.seen, c.RPC()), append(r.reqs, append([]byte(nil), c.Request...))
	r.mu.Unlock()
	return next(ctx, c.Request)
}

func (r *recorder) Own(string, time.Duration, error) {}

func (r *recorder) Done(method string, _ time.Duration, _ error) {
	r.mu.Lock()
	r.other = append(r.other, method)
	r.mu.Unlock()
}

func startProxied(t testing.TB, mw Middleware) (*grpc.ClientConn, func()) {
	t.Helper()
	g, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/echo", Options: selfAsProvider(t), Middleware: func(*Provider) (Middleware, error) { return mw, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+g.Proxies[0].socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		g.Stop()
		t.Fatal(err)
	}
	return conn, func() { conn.Close(); g.Stop() }
}

// Calls and fields outside oprov's stubs pass through the proxy byte for byte, both ways; the
// middleware sees every unary provider call with the request as tofu sent it.
func TestProxyPassesEverythingThrough(t *testing.T) {
	rec := &recorder{}
	conn, stop := startProxied(t, rec)
	defer stop()
	// A request with fields no stub knows: 1 (string), 77 (bytes), 12345 (fixed64).
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "acme_thing")
	req = protowire.AppendBytes(protowire.AppendTag(req, 77, protowire.BytesType), []byte{0, 1, 2, 255})
	req = protowire.AppendFixed64(protowire.AppendTag(req, 12345, protowire.Fixed64Type), 7)
	for _, method := range []string{"/tfplugin6.Provider/PlanResourceChange", "/tfplugin6.Provider/ListResource"} {
		var resp rawMsg
		if err := conn.Invoke(context.Background(), method, &rawMsg{b: req}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if want := append(append([]byte(nil), req...), echoMarker...); !bytes.Equal(resp.b, want) {
			t.Errorf("%s: the answer changed on the way:\n got %x\nwant %x", method, resp.b, want)
		}
	}
	sort.Strings(rec.seen)
	if fmt.Sprint(rec.seen) != "[PlanResourceChange]" || !bytes.Equal(rec.reqs[0], req) {
		t.Errorf("middleware saw %v", rec.seen)
	}
	if fmt.Sprint(rec.other) != "[/tfplugin6.Provider/ListResource]" {
		t.Errorf("streams reported as %v", rec.other)
	}
}

// A provider method the protocol model lacks (a newer protocol's) is refused when a middleware
// (audit, rules, recording) is on, naming it: what no surface understands is never passed on
// unseen. Neither the middleware nor the provider sees it.
func TestProxyRefusesAMethodTheModelLacks(t *testing.T) {
	rec := &recorder{}
	conn, stop := startProxied(t, rec)
	defer stop()
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "acme_thing")
	var resp rawMsg
	err := conn.Invoke(context.Background(), "/tfplugin6.Provider/SomeCallFromTheFuture", &rawMsg{b: req}, &resp, grpc.ForceCodec(rawCodec{}))
	if err == nil || !strings.Contains(err.Error(), `"/tfplugin6.Provider/SomeCallFromTheFuture" is not a method of plugin protocol 6`) || len(resp.b) > 0 {
		t.Fatalf("a call the model lacks: err %v, answer %x", err, resp.b)
	}
	if len(rec.seen)+len(rec.other) > 0 {
		t.Errorf("the middleware saw %v %v", rec.seen, rec.other)
	}
}

// BenchmarkProxyLatency measures what the proxy adds to one small call: the same call to the
// provider directly and through the proxy (with a pass-through middleware), side by side.
func BenchmarkProxyLatency(b *testing.B) {
	conn, direct, req, stop := proxiedAndDirect(b)
	defer stop()
	call := func(c *grpc.ClientConn) time.Duration {
		start := time.Now()
		var resp rawMsg
		if err := c.Invoke(context.Background(), "/tfplugin6.Provider/PlanResourceChange", &rawMsg{b: req}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	n := max(b.N, 2000)
	var directs, proxied []time.Duration
	for i := 0; i < n; i++ {
		directs = append(directs, call(direct))
		proxied = append(proxied, call(conn))
	}
	pct := func(d []time.Duration, q float64) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[int(float64(len(d)-1)*q)]
	}
	p50, p99 := pct(proxied, 0.5)-pct(directs, 0.5), pct(proxied, 0.99)-pct(directs, 0.99)
	fmt.Printf("\nproxy added latency per call over %d calls: p50 %v, p99 %v (direct p50 %v, through the proxy p50 %v; target p50 <= 0.5ms)\n", n, p50, p99, pct(directs, 0.5), pct(proxied, 0.5))
	b.ReportMetric(float64(p50.Microseconds()), "us-p50-added")
	b.ReportMetric(float64(p99.Microseconds()), "us-p99-added")
}

// proxiedAndDirect starts the test provider twice, once behind a proxy with a pass-through
// middleware, and gives a connection to each and a small request.
func proxiedAndDirect(b *testing.B) (proxied, direct *grpc.ClientConn, req []byte, stop func()) {
	conn, stopProxied := startProxied(b, &recorder{})
	g, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/echo", Options: selfAsProvider(b)}})
	if err != nil {
		stopProxied()
		b.Fatal(err)
	}
	req = protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "acme_thing")
	return conn, g.Providers[0].conn, req, func() { g.Stop(); stopProxied() }
}

// The proxy's socket, which tofu reattaches to, is outside the provider's private directory (its
// TMPDIR, which a sandbox lets it write): a provider that replaced it would talk to tofu itself,
// past the audit and the rules.
func TestProxySocketOutsideProviderDir(t *testing.T) {
	g, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/echo", Options: selfAsProvider(t), Middleware: func(*Provider) (Middleware, error) { return nopMiddleware{}, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	sock, own := g.Proxies[0].socket, g.Providers[0].dir
	if strings.HasPrefix(sock, own+"/") || !strings.HasPrefix(sock, g.Dir+"/") {
		t.Errorf("the proxy's socket %s is inside the provider's directory %s, or outside the run's %s", sock, own, g.Dir)
	}
}
