package oci

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// paced serves chunks of size bytes every `every`, n times.
func paced(size, n int, every time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for i := 0; i < n; i++ {
			w.Write(bytes.Repeat([]byte("x"), size))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(every):
			}
		}
	}))
}

func readAll(t *testing.T, window time.Duration, url string) (int, error) {
	t.Helper()
	rt, err := (&Client{Limits: Limits{StallTimeout: window}}).Transport()
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return len(data), err
}

// TestStallWatchdog: a body that keeps moving at least minProgress bytes a window is read whole,
// however long it takes; one that trickles less is cut with a StallError that says so.
func TestStallWatchdog(t *testing.T) {
	steady := paced(2*minProgress, 8, 50*time.Millisecond)
	defer steady.Close()
	if n, err := readAll(t, 500*time.Millisecond, steady.URL); err != nil || n != 16*minProgress {
		t.Errorf("a steady body: %d bytes, %v", n, err)
	}
	trickle := paced(10, 100, 50*time.Millisecond)
	defer trickle.Close()
	_, err := readAll(t, 500*time.Millisecond, trickle.URL)
	var stall *StallError
	if !errors.As(err, &stall) || stall.Bytes == 0 || stall.Phase != "the download of the response body" {
		t.Errorf("a trickling body: %v", err)
	}
}
