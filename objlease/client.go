package objlease

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/internal/recordwrite"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// Client takes, inspects and breaks the lease stored at one key. It remembers
// what it last saw of the record, which is how it judges expiry: a record
// expires for this client once it has seen the same version unchanged for
// the record's TTL × (1 + DriftBound) on its own clock. A Client is safe for
// concurrent use.
type Client struct {
	sess  *Session
	store providers.Store
	key   string
	opts  settings
	log   *slog.Logger
	// expiry and poll are the rules that judge expiry and time a waiter's
	// reads, from opts and the store.
	expiry  expiryRule
	poll    pollRule
	metrics leaseMetrics

	mu sync.Mutex
	// view is what this client last saw at the key; nil before the first
	// read. A nil record with a non-nil view means the key was absent.
	view *observation
	// listed is the last version a listing showed that this client had not
	// read (see Judge): a read that finds it counts it as seen since then.
	listed *observation
	// highest is the highest token this client has seen at the key. A
	// record with a lower one was rewritten by something else (objlease
	// never writes a lower token), and a record that vanished is recreated
	// above it, so that this client never reissues a token it knows of.
	highest uint64
	rnd     sync.Mutex // guards opts.Rand
	// salt makes this client's nonces its own whatever opts.Rand is seeded
	// with: two clients seeded alike would otherwise each take the other's
	// write for their own.
	salt [8]byte
}

// observation is one sighting of a record version.
type observation struct {
	version string
	rec     *Record
	attrs   providers.Attrs
	since   time.Time // when this client first saw this version (its own clock, after the read returned)
	mine    bool      // this client wrote this version

	// For an object that is not a valid record (rec nil, version set): why,
	// and what could be read of it, so that Force can wait out its TTL and
	// continue above its token.
	bad       *Error
	badTTL    time.Duration
	badToken  uint64
	badHolder string
}

func (o *observation) absent() bool { return o.rec == nil && o.version == "" }

// heldBad is the ErrHeld error for an object that is not a valid record,
// which Force replaces once it has been seen unchanged for wait more.
func (o *observation) heldBad(key string, wait time.Duration) *Error {
	reason := ErrBadRecord.Error()
	if o.bad != nil {
		reason = fmt.Sprintf("%v: %s", o.bad.Err, o.bad.Reason)
	}
	return &Error{Key: key, Err: ErrHeld, Record: &Record{Holder: o.badHolder, Token: o.badToken}, Wait: wait, Reason: reason}
}

// New returns a Client for the lease at key in store, on a session of its
// own with the default SessionOptions: the real clock, no logs, jitter
// seeded at random. It validates opts. To choose the clock, the logger or
// the seed, make a Session (NewSession) and its client (Session.Client).
// Clients that hold or await many leases at once should share one Session
// too: its scheduler serves them all.
func New(store providers.Store, key string, opts Options) (*Client, error) {
	sess, err := NewSession(store, SessionOptions{})
	if err != nil {
		return nil, err
	}
	return newClient(sess, key, opts)
}

// settings are what a client runs with: its Options with their defaults,
// and what its session gives it.
type settings struct {
	Options
	Clock  clock.Clock
	Logger *slog.Logger
	Rand   *rand.Rand // the client's own; guarded by Client.rnd
}

func newClient(sess *Session, key string, opts Options) (*Client, error) {
	store := sess.store
	if key == "" {
		return nil, fmt.Errorf("%w: empty lease key", ErrInvalidOptions)
	}
	opts = opts.withDefaults()
	if err := opts.validate(store.Properties().MinWriteInterval); err != nil {
		return nil, fmt.Errorf("lease %q: %w", key, err)
	}
	if slices.Contains(opts.FencedKeys, key) {
		return nil, fmt.Errorf("lease %q: %w: FencedKeys names the lease's own key %q: name the fenced data objects the lease guards",
			key, ErrInvalidOptions, key)
	}
	c := &Client{
		sess:  sess,
		store: store,
		key:   key,
		opts:  settings{Options: opts, Clock: sess.clk, Logger: sess.log, Rand: sess.NewRand()},
		log:   sess.log.With(slog.String("lease", key), slog.String("holder", opts.Holder)),
		expiry: expiryRule{drift: opts.DriftBound, storeClock: opts.StoreClock, margin: opts.StoreClockMargin,
			granularity: store.Properties().TimestampGranularity},
		metrics: newLeaseMetrics(key),
	}
	c.poll = pollRule{expiry: c.expiry, ttl: opts.TTL, renew: opts.RenewInterval, poll: opts.PollInterval}
	entropy.Read(c.salt[:])
	return c, nil
}

// Key returns the lease's key in its store.
func (c *Client) Key() string { return c.key }

// Store returns the store the lease lives in.
func (c *Client) Store() providers.Store { return c.store }

// nonce returns a fresh nonce: this client's salt, then bits from
// opts.Rand, so that it is unique across clients however they are seeded.
func (c *Client) nonce() string {
	c.rnd.Lock()
	defer c.rnd.Unlock()
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := c.opts.Rand.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	if uniqueNonces() {
		copy(b[:8], c.salt[:])
	}
	return hex.EncodeToString(b[:])
}

// jitter returns d scaled by a random factor in [0.8, 1.0): contenders
// spread out, and none waits longer than d, which bounds failover by
// TTL × (1 + drift) + PollInterval.
func (c *Client) jitter(d time.Duration) time.Duration {
	c.rnd.Lock()
	defer c.rnd.Unlock()
	return time.Duration(float64(d) * (0.8 + 0.2*c.opts.Rand.Float64()))
}

// read fetches the record and updates the client's view. It returns a nil
// record if the key is absent.
func (c *Client) read(ctx context.Context) (*observation, error) {
	obj, err := c.store.Get(ctx, c.key, MaxRecordSize)
	now := c.opts.Clock.Now() // after the read returned: the version was written before this instant
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, providers.ErrNotFound) {
		c.view = &observation{since: now}
		return c.view, nil
	}
	if errors.Is(err, providers.ErrTooLarge) {
		rerr := recordError(c.key, ErrBadRecord, "object is larger than %d bytes", MaxRecordSize)
		// Remember the version so that Force can replace exactly this object.
		a, serr := c.store.Stat(ctx, c.key)
		if serr != nil {
			return nil, rerr
		}
		if ferr := c.fenced(a.Metadata); ferr != nil {
			return nil, ferr
		}
		c.view = c.sawBad(a.Version, *a, nil, rerr, now)
		return c.view, rerr
	}
	if err != nil {
		return nil, err
	}
	if ferr := c.fenced(obj.Metadata); ferr != nil {
		return nil, ferr
	}
	if v := c.view; v != nil && v.rec != nil && v.version == obj.Version {
		// The version this client is watching, so the record it decoded
		// then: a waiting contender's reads decode nothing.
		v.attrs = obj.Attrs // keep since: same version, still observing
		return v, nil
	}
	rec, derr := DecodeRecord(c.key, obj.Data)
	if derr == nil {
		derr = c.tokenWentBack(rec)
	}
	if derr != nil {
		// Remember the version so that Force can replace exactly this object.
		c.view = c.sawBad(obj.Version, obj.Attrs, obj.Data, derr, now)
		return c.view, derr
	}
	c.view = c.sawRecord(obj.Version, rec, obj.Attrs, now)
	return c.view, nil
}

// sawRecord returns the observation of a new version holding rec, read by
// now; the caller holds c.mu. A listing that showed the version earlier
// dates it from then.
func (c *Client) sawRecord(version string, rec *Record, attrs providers.Attrs, now time.Time) *observation {
	c.highest = rec.Token
	since := now
	if l := c.listed; l != nil && l.version == version && l.since.Before(since) {
		// A listing showed this version earlier: it existed then.
		since = l.since
	}
	return &observation{version: version, rec: rec, attrs: attrs, since: since}
}

// sawBad returns the observation of a version that is not a valid record;
// the caller holds c.mu. It keeps the time of the first sighting while the
// version stays the same, and reads what it can of the object's TTL, token
// and holder.
func (c *Client) sawBad(version string, attrs providers.Attrs, data []byte, err error, now time.Time) *observation {
	if v := c.view; v != nil && v.rec == nil && v.version == version {
		v.attrs = attrs
		return v
	}
	o := &observation{version: version, attrs: attrs, since: now, badTTL: c.opts.TTL}
	errors.As(err, &o.bad)
	var v struct {
		Token     uint64 `json:"token"`
		Holder    string `json:"holder"`
		TTLMillis int64  `json:"ttl_ms"`
	}
	// Best effort: a foreign object has none of these.
	_ = json.NewDecoder(bytes.NewReader(data)).Decode(&v)
	if v.TTLMillis > 0 && v.TTLMillis <= MaxTTL.Milliseconds() {
		o.badTTL = time.Duration(v.TTLMillis) * time.Millisecond
	}
	o.badToken, o.badHolder = v.Token, v.Holder
	return o
}

// TryAcquire makes one attempt to take the lease. It returns an *Error
// matching ErrHeld when someone else holds it and it has not expired for
// this client. Calling it again later, on the same Client, is how a caller
// waits out a dead holder's TTL; Acquire does that for you.
//
// On success the lease is renewed in the background until Release or loss.
func (c *Client) TryAcquire(ctx context.Context) (*Lease, error) {
	ctx, span := c.startSpan(ctx, "objlease.acquire")
	l, err := c.tryAcquire(ctx)
	var token uint64
	if l != nil {
		token = l.Token()
	}
	endSpan(span, "acquired", token, err)
	return l, err
}

func (c *Client) tryAcquire(ctx context.Context) (*Lease, error) {
	if err := c.sess.err(c.key); err != nil {
		return nil, err
	}
	c.mu.Lock()
	view := c.view
	c.mu.Unlock()
	var err error
	switch {
	case view == nil || view.absent():
		// Nothing seen yet, or seen absent: try to create, so that an absent
		// lease costs one request.
		l, cerr := c.write(ctx, nil)
		if cerr == nil {
			return l, nil
		}
		if !errors.Is(cerr, providers.ErrPrecondition) {
			return nil, cerr
		}
		if view, err = c.readForWrite(ctx); err != nil {
			return nil, err
		}
	case view.mine && view.rec.State == StateReleased:
		// This client released it last: take it back without a read. If
		// someone else took it since, the write is refused and we read.
	default:
		if view, err = c.readForWrite(ctx); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		now := c.opts.Clock.Now()
		if view.absent() { // deleted between the read and now
			l, err := c.write(ctx, nil)
			if err == nil || !errors.Is(err, providers.ErrPrecondition) || attempt > 2 {
				return l, err
			}
		} else if err := c.tokenUnknown(view); err != nil {
			// With Force, a bad object that nothing shows a token for.
			return nil, err
		} else if view.rec == nil && c.expiry.forceWait(view, now) > 0 {
			// With Force, not a record, and not yet seen unchanged for long.
			return nil, view.heldBad(c.key, c.expiry.forceWait(view, now))
		} else if view.rec == nil || c.expiry.expiresIn(view, now) <= 0 {
			// Expired, released, or (with Force) a bad object seen unchanged
			// for its TTL.
			l, err := c.write(ctx, view)
			if err == nil || !errors.Is(err, providers.ErrPrecondition) || attempt > 2 {
				return l, err
			}
			// Someone else wrote first; look again.
		} else {
			return nil, heldError(c.key, view.rec, c.expiry.expiresIn(view, c.opts.Clock.Now()))
		}
		if view, err = c.readForWrite(ctx); err != nil {
			return nil, err
		}
	}
}

func (c *Client) highestSeen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.highest
}

// readForWrite reads the record; with Options.Force a bad record is not an
// error (the observation then has a version and no record).
func (c *Client) readForWrite(ctx context.Context) (*observation, error) {
	o, err := c.read(ctx)
	if err != nil && c.opts.Force && o != nil {
		return o, nil
	}
	return o, err
}

// write takes the lease over what o saw: a record, a bad object (with
// Force), or nothing (o nil or absent: create). Unknown outcomes are
// resolved by re-reading.
func (c *Client) write(ctx context.Context, o *observation) (*Lease, error) {
	done, err := c.sess.startAcquire(c.key)
	if err != nil {
		return nil, err
	}
	defer done()
	ifVersion := ""
	if o != nil {
		ifVersion = o.version // "" if absent: create
	}
	base, err := c.tokenBase(ctx, o)
	if err != nil {
		return nil, err
	}
	token, err := recordwrite.NextToken("lease", c.key, base)
	if err != nil {
		return nil, err
	}
	rec := &Record{
		Schema:    schemaVersion,
		Name:      c.key,
		Token:     token,
		Holder:    c.opts.Holder,
		Nonce:     c.nonce(),
		State:     StateHeld,
		TTLMillis: c.opts.TTL.Milliseconds(),
		Data:      c.opts.Data,
	}
	sent := c.opts.Clock.Now()
	rec.WrittenAt = time.Now().UTC()
	rec.AcquiredAt = rec.WrittenAt
	res, err := c.put(ctx, rec, ifVersion)
	if err != nil {
		return nil, err
	}
	c.log.Info("lease acquired", slog.Uint64("token", rec.Token))
	return c.newLease(ctx, rec, res, sent)
}

// put writes rec conditionally (create if ifVersion is ""). If the outcome
// is unknown, or the store reports a conflict, it re-reads until it can tell
// whether rec landed (the record then carries rec's holder and nonce); if
// the record is unchanged the write has not landed and is tried again, a
// few times, with the same bytes. An earlier attempt can still land late,
// before the retry: the retry is then refused, and that refusal too is
// resolved by re-reading for the nonce.
func (c *Client) put(ctx context.Context, rec *Record, ifVersion string) (providers.WriteResult, error) {
	res, _, err := c.putTracked(ctx, rec, ifVersion, nil)
	return res, err
}

// putTracked is put; uncertain reports that an attempt's outcome was
// unknown, so that it may have landed even if put reports a refusal. say
// logs its lines (a write re-read after an unknown outcome or a racing
// write); nil: the client's logger. The write loop is the shared one (recordwrite.Writer.Write): the
// client's part is its clock for the waits between re-reads and its
// recognition of its own write (readBack).
func (c *Client) putTracked(ctx context.Context, rec *Record, ifVersion string, say func(level slog.Level, msg string, attrs ...any)) (_ providers.WriteResult, uncertain bool, _ error) {
	body, err := encodeRecord(rec)
	if err != nil {
		return providers.WriteResult{}, false, err
	}
	if say == nil {
		say = func(level slog.Level, msg string, attrs ...any) {
			c.log.Log(context.Background(), level, msg, attrs...)
		}
	}
	w := recordwrite.Writer{
		Store: c.store,
		Key:   c.key,
		Noun:  "lease",
		Unusable: func(err error) bool {
			var re *Error
			return errors.As(err, &re) // the object is not a usable record
		},
		Permanent: IsPermanent,
		// Re-reads wait on the lease clock; a conflict's wait is network
		// time, on Go's timers, which a synctest bubble fakes, while the
		// session's clock may be a fake one that a test never advances.
		Sleep:  c.wait,
		Jitter: c.jitter,
		Log:    say,
	}
	r, err := w.Write(ctx, body, ifVersion, func(ctx context.Context) (recordwrite.Found, error) {
		return c.readBack(ctx, rec)
	})
	if err == nil && !r.ReadBack {
		c.mu.Lock()
		c.view = &observation{version: r.Version, rec: rec, since: c.opts.Clock.Now(), mine: true}
		c.highest = max(c.highest, rec.Token)
		c.mu.Unlock()
	}
	return r.WriteResult, r.Uncertain, err
}

// readBack re-reads the record to resolve the write of rec: it is this
// client's own write if it carries rec's nonce, token, state and holder.
func (c *Client) readBack(ctx context.Context, rec *Record) (recordwrite.Found, error) {
	if !nonceCheck() {
		return recordwrite.Found{Own: true}, nil // assume it landed
	}
	o, err := c.read(ctx)
	if err != nil {
		return recordwrite.Found{}, err
	}
	if o.rec != nil && o.rec.Nonce == rec.Nonce && o.rec.Token == rec.Token && o.rec.State == rec.State &&
		(o.rec.Holder == rec.Holder || !ownWriteCheck()) {
		// Its own write, token and state too: a record rewritten after the
		// write landed may keep the nonce (a hand edit), and is someone
		// else's write.
		return recordwrite.Found{Version: o.version, Own: true,
			Result: providers.WriteResult{Version: o.version, LastModified: o.attrs.LastModified, StoreTime: o.attrs.StoreTime}}, nil
	}
	return recordwrite.Found{Version: o.version}, nil
}

// Acquire waits until it holds the lease or ctx ends. While the lease is
// held elsewhere it polls every PollInterval (jittered) until it has learned
// from the record's renewal count when the holder's renewals land, then
// reads once per renewal interval R, just after each renewal lands: a
// release is seen within about R, a dead holder's last write at once (see
// phaseTracker). It always reads at the first instant the record could
// expire for this client: TTL × (1 + DriftBound) after it first saw the
// version, or, with Options.StoreClock on a store that reports its own
// time, the first instant the store's clock could show the record older
// than TTL + granularity + margin (see storePhase). A store that cannot be
// reached is tried again with backoff (up to PollInterval) for as long as
// ctx allows, with one warning per streak of failures; errors that waiting
// cannot cure (see IsPermanent) end it at once. With a ctx that ends
// during the first attempt, that attempt is the only one. It waits in
// Await.
func (c *Client) Acquire(ctx context.Context) (*Lease, error) {
	return Await(ctx, c, c.TryAcquire, nil)
}

// Break ends the lease whatever its state: it writes a released record whose
// token is one higher than the current one, so that a fenced resource that
// sees the new token refuses the old holder. It returns the new token. An
// object that is not a valid record is only replaced with Options.Force,
// and only if a token to continue above can be found (see Options.Force):
// else Break returns an *Error (ErrTokenUnknown). The new token is
// also above Options.MinToken and the tokens of Options.FencedKeys.
func (c *Client) Break(ctx context.Context) (uint64, error) {
	if err := c.sess.err(c.key); err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		o, err := c.readForWrite(ctx)
		if err != nil {
			return 0, err
		}
		rec := &Record{Schema: schemaVersion, Name: c.key, Nonce: c.nonce(), State: StateReleased,
			TTLMillis: c.opts.TTL.Milliseconds(), WrittenAt: time.Now().UTC()}
		if o.rec != nil {
			rec.TTLMillis = o.rec.TTLMillis
		}
		base, err := c.tokenBase(ctx, o)
		if err != nil {
			return 0, err
		}
		if rec.Token, err = recordwrite.NextToken("lease", c.key, base); err != nil {
			return 0, err
		}
		_, err = c.put(ctx, rec, o.version)
		if err == nil {
			c.log.Warn("lease broken", slog.Uint64("token", rec.Token))
			return rec.Token, nil
		}
		if !errors.Is(err, providers.ErrPrecondition) || attempt > 3 {
			return 0, err
		}
	}
}

// Release releases the lease if the record says this client's holder
// identity holds it, without a Lease value: for a process other than the one
// that acquired it (the CLI's release command). It returns an *Error (ErrHeld) if
// someone else holds it, and nil if it is already released.
func (c *Client) Release(ctx context.Context) (err error) {
	ctx, span := c.startSpan(ctx, "objlease.release")
	defer func() { endSpan(span, "released", 0, err) }()
	if err := c.sess.err(c.key); err != nil {
		return err
	}
	o, err := c.read(ctx)
	if err != nil {
		return err
	}
	switch {
	case o.rec == nil:
		return fmt.Errorf("lease %q: %w", c.key, providers.ErrNotFound)
	case o.rec.State == StateReleased:
		return nil
	case o.rec.Holder != c.opts.Holder:
		return heldError(c.key, o.rec, c.expiry.expiresIn(o, c.opts.Clock.Now()))
	}
	next := *o.rec
	next.Nonce = c.nonce()
	next.State = StateReleased
	next.WrittenAt = time.Now().UTC()
	next.Data = nil
	_, err = c.put(ctx, &next, o.version)
	return err
}

// Options returns the client's effective options, defaults filled in.
func (c *Client) Options() Options { return c.opts.Options }

// Session returns the session the client belongs to: its own, for a client
// from New.
func (c *Client) Session() *Session { return c.sess }

// wait blocks for d on the client's clock, or until ctx ends.
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, c.opts.Clock, d)
}
