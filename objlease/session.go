package objlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// SessionOptions configure a Session. The zero value is usable: every zero
// field takes its default.
type SessionOptions struct {
	// Clock is the time source of every client, lease and waiter of the
	// session. Default clock.Real(), which counts time the machine spent
	// suspended and never steps (see package clock). A clock of one's own
	// is only compared with itself (Sub, Before), and one that stops while
	// the machine is suspended, as time.Now's monotonic reading does on
	// Linux, lets a holder wake from a suspend believing it still holds.
	Clock clock.Clock
	// Logger receives the structured logs of the session and its clients.
	// Default: discard.
	Logger *slog.Logger
	// Rand seeds the source of jitter of each of the session's clients.
	// Default seeded at random; set it to make a simulation reproducible.
	// A *rand.Rand is not safe for concurrent use, so the session draws
	// each client's own source from it, under the session's lock, as
	// Session.Client makes the client: with a fixed seed, clients made in
	// the same order jitter alike from run to run. It also feeds the
	// nonces, but they are unique whatever it is seeded with: each Client
	// mixes in a salt of its own from crypto/rand.
	Rand *rand.Rand
}

// A Session shares one store, one clock, one logger and one scheduler
// among the clients made from it (see Session.Client), and through them
// among the elections, semaphores and shard workers built on it: however
// many leases a session holds or awaits, a few goroutines renew and watch
// them all. The scheduler runs only while the session holds or awaits a
// lease, so an idle session costs nothing and needs no Close; Close
// releases what it holds.
//
// A Session is safe for concurrent use.
type Session struct {
	store providers.Store
	clk   clock.Clock
	log   *slog.Logger
	// rnd seeds each client's own source of jitter; guarded by mu.
	rnd *rand.Rand
	// report writes the logs and metrics of background work (see
	// reporter).
	report *reporter

	mu sync.Mutex
	// sched renews, watches and retries for the session while it holds or
	// awaits a lease; nil otherwise (see join).
	sched   *scheduler
	leases  map[*Lease]struct{}
	waiters map[*waiter]struct{}
	closed  bool
	// acquiring counts the acquiring writes of the session's clients in
	// flight (see startAcquire); acquired, made by Close while some are,
	// is closed when the last of them has ended.
	acquiring int
	acquired  chan struct{}
}

// NewSession returns a session on store. It sends no request.
func NewSession(store providers.Store, opts SessionOptions) (*Session, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOptions)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Session{
		store: store, clk: opts.Clock, log: opts.Logger, rnd: opts.Rand, report: &reporter{log: opts.Logger},
		leases: map[*Lease]struct{}{}, waiters: map[*waiter]struct{}{},
	}, nil
}

// Client returns a client for the lease at key in the session's store. It
// validates opts. The client runs on the session's clock, logs to the
// session's logger, and jitters from a source of its own drawn from the
// session's (see SessionOptions.Rand).
func (s *Session) Client(key string, opts Options) (*Client, error) {
	if err := s.err(key); err != nil {
		return nil, err
	}
	return newClient(s, key, opts)
}

// Clock returns the session's clock (SessionOptions.Clock, or its
// default), which its clients, leases and waiters run on.
func (s *Session) Clock() clock.Clock { return s.clk }

// Logger returns the session's logger (SessionOptions.Logger, or its
// default, which discards).
func (s *Session) Logger() *slog.Logger { return s.log }

// NewRand returns a new source of randomness seeded from the session's
// (SessionOptions.Rand), under the session's lock: each client gets one
// for its jitter, and a recipe built on the session (a semaphore choosing
// its first slot, a shard worker spreading its scans) takes one for its
// own draws, so that a fixed seed makes a run reproducible. The source is
// the caller's own: a *rand.Rand is not safe for concurrent use.
func (s *Session) NewRand() *rand.Rand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rand.New(rand.NewPCG(s.rnd.Uint64(), s.rnd.Uint64()))
}

// Close ends the session: it releases every lease the session holds (their
// contexts end with ErrReleased), ends every AcquireFunc waiting in it
// with ErrSessionClosed, and stops its scheduler. From then on its clients
// refuse every request with ErrSessionClosed. A lease whose release fails,
// or that ctx leaves no time to release, is still ended here (its context
// ends with ErrLeaseLost and ErrSessionClosed) and expires on its own
// after its TTL; Close returns those errors, joined. An acquisition whose
// write is in flight when the session closes is refused with
// ErrSessionClosed once the write lands, and Close waits until its record
// has been given back, so that no record of the session's is held once
// Close returns; if ctx ends first, Close returns its cause, and such a
// record expires on its own. Closing a closed session does nothing and
// returns nil. Close does not close the store.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var acquired chan struct{}
	if s.acquiring > 0 {
		s.acquired = make(chan struct{})
		acquired = s.acquired
	}
	leases := make([]*Lease, 0, len(s.leases))
	for l := range s.leases {
		leases = append(leases, l)
	}
	waiters := make([]*waiter, 0, len(s.waiters))
	for w := range s.waiters {
		waiters = append(waiters, w)
	}
	s.mu.Unlock()

	for _, w := range waiters {
		w.end(errSessionClosed(w.c.key))
	}
	var errs []error
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			errs = append(errs, err)
		}
		// Release ends the lease unless ctx ended first: end it anyway,
		// so that nothing of the session is left running.
		l.end(fmt.Errorf("%w: lease %q: %w before it could be released", ErrLeaseLost, l.c.key, ErrSessionClosed))
	}
	if acquired != nil {
		// A write sent before the session closed may land after the
		// leases above were counted: its lease is refused, and its record
		// given back, by the acquiring call. Returning before that would
		// leave a record held by a closed session.
		select {
		case <-acquired:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%w: acquisitions still in flight; a record they wrote expires on its own: %w", ErrSessionClosed, context.Cause(ctx)))
		}
	}
	s.log.Debug("session closed", slog.Int("leases", len(leases)), slog.Int("waiters", len(waiters)))
	return errors.Join(errs...)
}

// startAcquire counts an acquiring write of key's client about to be
// sent, or refuses it once the session is closed. The caller calls done
// once the write has failed, or its lease is registered or its record
// given back (see Client.newLease): Close waits for that.
func (s *Session) startAcquire(key string) (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSessionClosed(key)
	}
	s.acquiring++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.acquiring--
		if s.acquiring == 0 && s.acquired != nil {
			close(s.acquired)
			s.acquired = nil
		}
	}, nil
}

// err returns ErrSessionClosed, naming key, once the session is closed.
func (s *Session) err(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSessionClosed(key)
	}
	return nil
}

func errSessionClosed(key string) error {
	return fmt.Errorf("lease %q: %w", key, ErrSessionClosed)
}
