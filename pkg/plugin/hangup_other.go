//go:build !linux

package plugin

import "os"

// WatchHangup gives nil (a channel never closed) where it is not built: a far side whose output
// alone went away learns it at its next write, the keepalive's ping at the latest.
func WatchHangup(*os.File) <-chan struct{} { return nil }
