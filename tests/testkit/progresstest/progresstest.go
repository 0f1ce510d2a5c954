// Package progresstest holds a progress recorder for tests of what moves bytes.
package progresstest

import (
	"sync"
	"testing"
)

// PlanCheck is a progress (oci.Progress) that fails the test when more bytes move than were
// planned so far: a display fed by it would pass 100%.
type PlanCheck struct {
	T *testing.T

	mu            sync.Mutex
	planned, done int64
}

func (p *PlanCheck) Plan(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planned += n
}

func (p *PlanCheck) Advance(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.done > p.planned {
		p.T.Errorf("%d bytes moved with only %d planned", p.done, p.planned)
	}
}

// Totals gives the bytes planned and moved so far.
func (p *PlanCheck) Totals() (planned, done int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.planned, p.done
}
