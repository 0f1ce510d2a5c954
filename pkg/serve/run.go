package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// RunOptions say how to listen and stop.
type RunOptions struct {
	TLS *tls.Config
	// Drain is how long a shutdown waits for requests under way (downloads included) to finish.
	Drain time.Duration
	// Stopping, when set, is closed or signalled by a second request to stop: requests still
	// under way are then cut off instead of drained.
	Stopping <-chan struct{}
}

// Run serves HTTPS on ln until ctx ends, then shuts down gracefully: it stops accepting
// connections, lets the requests under way finish (up to opts.Drain), and returns.
func (s *Server) Run(ctx context.Context, ln net.Listener, opts RunOptions) error {
	l := s.limits
	// Requests carry the values of ctx (the registry limits among them), not its end: a shutdown
	// drains them instead.
	base := context.WithoutCancel(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         opts.TLS,
		ReadHeaderTimeout: l.HeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: l.MaxStreams,
			// Bound how long a stream may wait for the client to open its window: a zero-window
			// stream is also cut off by the stall deadline.
			WriteByteTimeout: l.StallTimeout,
			SendPingTimeout:  l.StallTimeout,
			PingTimeout:      l.StallTimeout / 2,
		},
		BaseContext: func(net.Listener) context.Context { return base },
		ConnContext: connContext,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.cfg.CatalogRefresh > 0 {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go s.catalogLoop(cctx)
	}
	cl := &connListener{Listener: ln, limits: l, metrics: s.metrics}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(cl, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	cl.Close() // before the log says so: no new connection from here on
	s.log.Info("shutting down: no new connections; draining requests under way", slog.Int64("in_flight", s.active.Load()), slog.String("drain_timeout", opts.Drain.String()))
	dctx, cancel := context.WithTimeout(context.Background(), opts.Drain)
	defer cancel()
	until := time.Now().Add(opts.Drain)
	cl.draining.Store(&until)
	// Connections closed from now on linger until their clients have read everything; the
	// process waits for them (within the drain) before it exits.
	defer func() {
		lingered := make(chan struct{})
		go func() { cl.lingering.Wait(); close(lingered) }()
		select {
		case <-lingered:
		case <-dctx.Done():
		}
	}()
	go func() {
		select {
		case <-opts.Stopping:
			s.log.Warn("asked again to stop: cutting off requests under way")
			cancel()
		case <-dctx.Done():
		}
	}()
	err := srv.Shutdown(dctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		srv.Close()
		s.log.Warn("stopped before every request finished", slog.String("error", err.Error()))
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("stopped: every request finished")
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
