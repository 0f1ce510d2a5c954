package plugin

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// A hostile near side that holds the far side's opening open (never sending its request, or
// trickling it a byte at a time, or never sending the zip it declared) is given up at the opening
// timeout, with an error naming that bound: a far side is one process per connection, and an
// account that may connect must not be able to keep processes waiting forever.
func TestRemoteHostOpeningIsBounded(t *testing.T) {
	for name, near := range map[string]func(w *io.PipeWriter){
		"silent": func(*io.PipeWriter) {},
		"trickle": func(w *io.PipeWriter) {
			for {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		"zip never sent": func(w *io.PipeWriter) {
			w.Write([]byte(`{"protocol":2,"address":"example.com/acme/x","size":1000}` + "\n"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			toFar, fromNear := io.Pipe()
			fromFar, toNear := io.Pipe()
			defer fromNear.Close()
			go io.Copy(io.Discard, fromFar)
			go near(fromNear)
			h := &RemoteHost{In: toFar, Out: toNear, Platform: "linux_amd64", OpenTimeout: 300 * time.Millisecond,
				Launch: func(_ context.Context, _ *RemoteRequest, zip func(io.Writer) error) (Options, error) {
					return Options{}, zip(io.Discard)
				}}
			done := make(chan error, 1)
			go func() { done <- h.Serve(context.Background()) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "within 300ms") {
					t.Errorf("err = %v, want the opening timeout named", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the far side still waits for the near side's opening after 5s (bound: 300ms)")
			}
		})
	}
}
