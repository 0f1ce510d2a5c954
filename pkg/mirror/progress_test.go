package mirror

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"oras.land/oras-go/v2/content"
)

// planCheck is a Progress that fails the test when more bytes move than were planned so far:
// a display fed by it would pass 100%.
type planCheck struct {
	t             *testing.T
	mu            sync.Mutex
	planned, done int64
}

func (p *planCheck) Plan(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planned += n
}

func (p *planCheck) Advance(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.done > p.planned {
		p.t.Errorf("%d bytes moved with only %d planned", p.done, p.planned)
	}
}

// TestMirrorProgressStaysWithinItsPlan: mirroring plans each download (from its Content-Length)
// before its bytes arrive, and each upload before it is sent, and ends with everything planned
// moved.
func TestMirrorProgressStaysWithinItsPlan(t *testing.T) {
	org, ca := testOrigin(t)
	target, to := layout(t)
	p := &planCheck{t: t}
	opts := mirrorOptions(org, ca, to)
	opts.Progress = p
	if _, err := Mirror(context.Background(), target, opts); err != nil {
		t.Fatal(err)
	}
	if p.done == 0 || p.done != p.planned {
		t.Errorf("moved %d bytes of %d planned", p.done, p.planned)
	}
}

// TestCopyProgressStaysWithinItsPlan: a copy plans each blob before sending it and reports its
// bytes as they are read, ending with everything planned moved.
func TestCopyProgressStaysWithinItsPlan(t *testing.T) {
	org, ca := testOrigin(t)
	src, from := layout(t)
	if _, err := Mirror(context.Background(), src, mirrorOptions(org, ca, from)); err != nil {
		t.Fatal(err)
	}
	dst, _ := layout(t)
	p := &planCheck{t: t}
	res, err := Copy(context.Background(), src, dst, []string{"1.0.0"}, CopyOptions{Progress: p})
	if err != nil {
		t.Fatal(err)
	}
	if p.done != res.Bytes || p.planned != res.Bytes {
		t.Errorf("copied %d bytes; progress planned %d and moved %d", res.Bytes, p.planned, p.done)
	}
}

// TestCopyProgressMovesWithTheBytes: one blob's push reports its bytes as they are read, in
// several steps, not once at the end.
func TestCopyProgressMovesWithTheBytes(t *testing.T) {
	dst, _ := layout(t)
	data := bytes.Repeat([]byte("x"), 256<<10)
	desc := content.NewDescriptorFromBytes("application/octet-stream", data)
	steps := &stepCount{}
	if err := (progressDestination{dst, steps}).Push(context.Background(), desc, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if steps.done != int64(len(data)) || steps.calls < 2 {
		t.Errorf("a %d-byte push reported %d bytes in %d steps", len(data), steps.done, steps.calls)
	}
}

type stepCount struct{ done, calls int64 }

func (s *stepCount) Plan(int64)      {}
func (s *stepCount) Advance(n int64) { s.done += n; s.calls++ }
