//go:build !linux

package plugin

import (
	"context"
	"errors"
	"io"
)

// sharedDialer: a shared connection needs what only Linux gives here (an abstract socket that a
// sandboxed provider cannot reach, and who is at its other end); elsewhere each start makes a
// connection of its own.
func sharedDialer(context.Context, RemoteOptions) (streamDialer, error) {
	return nil, &notShared{errors.New("sharing a connection needs Linux")}
}

// ServeBroker is a broker, which only Linux runs (sharedDialer starts none elsewhere).
func ServeBroker(io.Reader, io.WriteCloser) error {
	return errors.New("oprov's broker runs only on Linux")
}
