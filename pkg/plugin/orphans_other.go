//go:build !linux

package plugin

import "time"

// AdoptOrphans does nothing where the kernel has no child subreaper: a process a provider started
// that left its process group is not followed there.
func AdoptOrphans() error { return nil }

// KillOrphans does nothing where AdoptOrphans does nothing.
func KillOrphans(time.Duration) {}
