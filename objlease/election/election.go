// Package election elects a leader through a lease, in the spirit of
// client-go's leaderelection: campaign until the context ends, with
// callbacks when this process starts and stops leading and when a new leader
// is observed.
//
// Two leaders' callbacks never run at once as long as each callback stops
// acting when its context ends:
//
//   - Stepping down (Run's context ends, or Resign): the callback's context
//     is cancelled, the elector waits for the callback to return, renewing
//     the lease meanwhile, and only then releases the lease. A callback that
//     takes long to return keeps the lease, and Run, until it does.
//   - Losing the lease (renewals failed, or it was broken): the callback's
//     context ends no later than the end of the holder's safe validity,
//     before anyone else can take over. A callback that ignores its context
//     then may still be acting when the next leader starts: nothing here can
//     stop it. What protects the resource then is fencing: writes that carry
//     the lease's token and that the resource refuses once a higher token has
//     written (package fence).
package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/objlease/objlease/objlease"
)

// Leader describes a lease holder as seen by an observer.
type Leader struct {
	Holder string
	Token  uint64
	Data   []byte // the leader's Options.Data, e.g. its address
	Self   bool   // this process is the leader
}

// Config holds an Elector's callbacks. The lease's timings (TTL, renew
// and poll intervals) and Data, which observers see, are New's opts.
type Config struct {
	// OnStartedLeading runs in its own goroutine when this process becomes
	// leader. ctx is cancelled when leadership ends or is to end; the elector
	// waits for the callback to return before it releases the lease and
	// before campaigning again. See the package doc for what happens if the
	// callback goes on acting after ctx ends.
	OnStartedLeading func(ctx context.Context, lease *objlease.Lease)
	// OnStoppedLeading, optional, runs after leadership ends.
	OnStoppedLeading func()
	// OnNewLeader, optional, runs whenever the observed leader changes
	// (including to this process).
	OnNewLeader func(Leader)
}

// errSteppingDown is the cause of a callback's context when this process
// steps down: its lease is about to be released.
var errSteppingDown = fmt.Errorf("%w: stepping down", objlease.ErrReleased)

// Elector campaigns for leadership. It keeps one client for its whole
// life, so what that client has observed of the record (how long it has
// seen it unchanged, the holder's renewal phase) carries over from one
// campaign (Run) to the next.
type Elector struct {
	client *objlease.Client
	cfg    Config
	log    *slog.Logger
	mu     sync.Mutex
	leader Leader
	known  bool
	lease  *objlease.Lease
	// running is set while a Run is in progress; stop ends it.
	running bool
	stop    context.CancelFunc
	// resigned: Resign was called while no Run was in progress, so the
	// next Run returns at once.
	resigned bool
}

// ErrInvalidConfig: the Config is incomplete.
var ErrInvalidConfig = errors.New("invalid election config")

// ErrRunning: Run was called while another Run of the same Elector was in
// progress. An Elector campaigns once at a time; run a second campaign
// after the first has returned, or with another Elector.
var ErrRunning = errors.New("election: Run already in progress on this Elector")

// New returns an Elector that campaigns for the lease at key through
// sess, with opts (validated as Session.Client does: the same holder
// identity and timings for every campaign). It makes the elector's one
// client now and sends no request. A nil sess, an empty key or invalid
// opts give an error matching objlease.ErrInvalidOptions; a Config without
// OnStartedLeading, ErrInvalidConfig.
func New(sess *objlease.Session, key string, opts objlease.Options, cfg Config) (*Elector, error) {
	switch {
	case sess == nil:
		return nil, fmt.Errorf("%w: nil session", objlease.ErrInvalidOptions)
	case cfg.OnStartedLeading == nil:
		return nil, fmt.Errorf("%w: OnStartedLeading is nil", ErrInvalidConfig)
	}
	c, err := sess.Client(key, opts)
	if err != nil {
		return nil, err
	}
	return &Elector{client: c, cfg: cfg, log: sess.Logger()}, nil
}

// Run campaigns until ctx ends or Resign is called. It waits for the
// lease in objlease.Await, on the holder's renewal phase as
// Client.Acquire does. When it returns while leading, it releases the
// lease (keeping its token) so that another process can lead at once. It
// returns nil when ctx ends or Resign is called, and an error that
// campaigning cannot cure (objlease.IsPermanent: a missing bucket, refused
// credentials, an object at the key that is not a lease record) at once.
//
// Run may be called again once it has returned, to campaign again with
// the same client. One Run at a time: a Run called while another is in
// progress returns ErrRunning at once.
func (e *Elector) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.mu.Lock()
	switch {
	case e.running:
		e.mu.Unlock()
		return ErrRunning
	case e.resigned:
		e.resigned = false
		e.mu.Unlock()
		return nil
	}
	e.running, e.stop = true, cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running, e.stop = false, nil
		e.mu.Unlock()
	}()
	c := e.client
	progress := func(p objlease.Progress) {
		if h := p.Held; h != nil {
			e.observe(Leader{Holder: h.Record.Holder, Token: h.Record.Token, Data: h.Record.Data})
		}
	}
	for ctx.Err() == nil {
		lease, err := objlease.Await(ctx, c, c.TryAcquire, progress)
		switch {
		case err == nil:
			e.lead(ctx, lease)
		case ctx.Err() != nil:
			return nil
		default:
			return err
		}
	}
	return nil
}

// lead runs one term of leadership.
func (e *Elector) lead(ctx context.Context, lease *objlease.Lease) {
	e.mu.Lock()
	e.lease = lease
	e.mu.Unlock()
	e.observe(Leader{Holder: lease.Record().Holder, Token: lease.Token(), Data: lease.Record().Data, Self: true})
	cbCtx, stop := context.WithCancelCause(lease.Context())
	defer stop(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.cfg.OnStartedLeading(cbCtx, lease)
	}()
	select {
	case <-lease.Done(): // lost
	case <-ctx.Done(): // stopped or resigned
	}
	release := func() {
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
			e.log.Warn("release on stepping down failed; the lease will expire", slog.Any("err", err))
		}
	}
	if callbackBeforeRelease() {
		// Nobody else may lead before this callback has returned: end its
		// context, wait for it (the lease is still renewed meanwhile), and
		// only then write the released record.
		stop(errSteppingDown)
		<-done
		release()
	} else {
		release()
		<-done
	}
	e.mu.Lock()
	e.lease = nil
	e.mu.Unlock()
	if e.cfg.OnStoppedLeading != nil {
		e.cfg.OnStoppedLeading()
	}
}

func (e *Elector) observe(l Leader) {
	e.mu.Lock()
	changed := !e.known || e.leader.Holder != l.Holder || e.leader.Token != l.Token
	e.leader, e.known = l, true
	e.mu.Unlock()
	if changed && e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(l)
	}
}

// Resign ends the Run in progress: it steps down if leading (releasing
// the lease, keeping its token, once OnStartedLeading has returned) and
// makes that Run return nil. Called while no Run is in progress (before
// the first, or between two), it makes the next Run return nil at once
// without campaigning, so that a Resign racing a Run just being started
// is not lost; the Run after that campaigns again. Resign does not wait
// for Run to return.
func (e *Elector) Resign() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		e.stop()
		return
	}
	e.resigned = true
}

// Leader returns the last leader observed, and whether there was one.
func (e *Elector) Leader() (Leader, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader, e.known
}

// ValidFor returns how long this process's leadership is certainly
// exclusive, with no round trip (0 when not leading). A leader may serve
// reads from local state while it is positive.
func (e *Elector) ValidFor() time.Duration {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return 0
	}
	return max(l.ValidFor(), 0)
}

// Observe reads who leads now, without campaigning. ok is false when nobody
// holds the lease.
func Observe(ctx context.Context, c *objlease.Client) (leader Leader, ok bool, err error) {
	st, err := c.Inspect(ctx)
	if err != nil || st.Record == nil || st.Record.State != objlease.StateHeld {
		return Leader{}, false, err
	}
	r := st.Record
	return Leader{Holder: r.Holder, Token: r.Token, Data: r.Data, Self: r.Holder == c.Options().Holder}, true, nil
}

// Watch follows who leads, without campaigning, as etcd's
// Election.Observe does: it calls f with the leader at once and then at
// each change of leader (another holder or another term), with ok false
// while nobody leads (the lease is free, released or expired for c). It
// reads in objlease.Client.Watch, on the leader's renewal phase, and
// returns as that does: nil when ctx ends, f's error, or an error that
// waiting cannot cure.
func Watch(ctx context.Context, c *objlease.Client, f func(leader Leader, ok bool) error) error {
	var last *Leader
	return c.Watch(ctx, func(st *objlease.Status) error {
		var l Leader
		r := st.Record
		ok := r != nil && r.State == objlease.StateHeld && !st.Expired
		if ok {
			l = Leader{Holder: r.Holder, Token: r.Token, Data: r.Data, Self: r.Holder == c.Options().Holder}
		}
		if last != nil && last.Holder == l.Holder && last.Token == l.Token {
			return nil
		}
		last = &l
		return f(l, ok)
	})
}

// RunOnce is the short form for serverless jobs: try once to become leader;
// if another process leads, return an error matching objlease.ErrHeld
// without running work. Otherwise run work with the lease renewed in the
// background and release it at the end, after cancelling work's context
// (so that anything work left running with it is told to stop before
// another process can run). work's context is cancelled if the lease is
// lost; RunOnce then returns an error matching objlease.ErrLeaseLost along
// with work's own.
func RunOnce(ctx context.Context, c *objlease.Client, work func(ctx context.Context, lease *objlease.Lease) error) error {
	lease, err := c.TryAcquire(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lease.Done():
			cancel(context.Cause(lease.Context()))
		case <-wctx.Done():
		}
	}()
	werr := work(wctx, lease)
	if callbackBeforeRelease() {
		// Whatever work left running with wctx is told to stop before the
		// released record lets another process run.
		cancel(errSteppingDown)
	}
	return errors.Join(werr, lease.Release(context.WithoutCancel(ctx)))
}
