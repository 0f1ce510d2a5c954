//go:build unix

package plugin

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// BenchmarkProxyCPU measures the CPU time the proxy adds per call when tofu keeps ten calls in
// flight (its default parallelism): this process's CPU (the calling side, plus the proxy in the
// second half) over the same calls made directly and through the proxy.
func BenchmarkProxyCPU(b *testing.B) {
	conn, direct, req, stop := proxiedAndDirect(b)
	defer stop()
	const workers, perWorker = 10, 500
	run := func(c *grpc.ClientConn) time.Duration {
		before := cpuTime(b)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWorker; i++ {
					var resp rawMsg
					if err := c.Invoke(context.Background(), "/tfplugin6.Provider/ValidateResourceConfig", &rawMsg{b: req}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return cpuTime(b) - before
	}
	run(conn) // warm both paths
	run(direct)
	var directCPU, proxiedCPU time.Duration
	for i := 0; i < max(b.N, 3); i++ {
		directCPU += run(direct)
		proxiedCPU += run(conn)
	}
	calls := time.Duration(max(b.N, 3) * workers * perWorker)
	fmt.Printf("\nproxy CPU per call, %d in flight: %v (direct %v per call, through the proxy %v)\n", workers, (proxiedCPU-directCPU)/calls, directCPU/calls, proxiedCPU/calls)
	b.ReportMetric(float64((proxiedCPU-directCPU)/calls)/1e3, "us-cpu-added")
}

func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
