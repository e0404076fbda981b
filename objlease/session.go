package objlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// SessionOptions configure a Session. The zero value is usable: every zero
// field takes its default.
type SessionOptions struct {
	// Clock is the time source of every client, lease and waiter of the
	// session. Default clock.Real(); see Options.Clock for what a clock
	// must do.
	Clock clock.Clock
	// Logger receives structured logs. It is the default Options.Logger of
	// the session's clients. Default: discard.
	Logger *slog.Logger
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
	return &Session{
		store: store, clk: opts.Clock, log: opts.Logger, report: &reporter{log: opts.Logger},
		leases: map[*Lease]struct{}{}, waiters: map[*waiter]struct{}{},
	}, nil
}

// Client returns a client for the lease at key in the session's store. It
// validates opts. The session's clock is the client's: Options.Clock must
// be nil or the session's own (SessionOptions.Clock), so that options a
// session was built from can be passed on as they are. Options.Logger
// defaults to the session's logger. The client's Options report the
// store's clock and logger, which is how a recipe built on a session
// finds them.
func (s *Session) Client(key string, opts Options) (*Client, error) {
	if opts.Clock != nil && !sameClock(opts.Clock, s.clk) {
		return nil, fmt.Errorf("lease %q: %w: Options.Clock is not the session's: a session's clients use the session's clock (SessionOptions.Clock)", key, ErrInvalidOptions)
	}
	if err := s.err(key); err != nil {
		return nil, err
	}
	return s.client(key, opts)
}

// sameClock reports whether a and b are the same clock, without panicking
// on a clock type that cannot be compared.
func sameClock(a, b clock.Clock) bool {
	if t := reflect.TypeOf(a); t != reflect.TypeOf(b) || !t.Comparable() {
		return false
	}
	return a == b
}

func (s *Session) client(key string, opts Options) (*Client, error) {
	opts.Clock = s.clk
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	return newClient(s, key, opts)
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
