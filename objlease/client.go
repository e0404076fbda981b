package objlease

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/internal/fencemeta"
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
	opts  Options
	log   *slog.Logger

	mu sync.Mutex
	// view is what this client last saw at the key; nil before the first
	// read. A nil record with a non-nil view means the key was absent.
	view *observation
	// listed is the last version a listing showed that this client had not
	// read (see Observe): a read that finds it counts it as seen since then.
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
	bad       *RecordError
	badTTL    time.Duration
	badToken  uint64
	badHolder string
}

func (o *observation) absent() bool { return o.rec == nil && o.version == "" }

// New returns a Client for the lease at key in store, on a session of its
// own (see Session) whose clock and logger are opts.Clock and opts.Logger.
// It validates opts. Clients that hold or await many leases at once
// should share one Session instead: its scheduler serves them all.
func New(store providers.Store, key string, opts Options) (*Client, error) {
	sess, err := NewSession(store, SessionOptions{Clock: opts.Clock, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	return sess.client(key, opts)
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
		opts:  opts,
		log:   opts.Logger.With(slog.String("lease", key), slog.String("holder", opts.Holder)),
	}
	entropy.Read(c.salt[:])
	return c, nil
}

// Key returns the lease's key in its store.
func (c *Client) Key() string { return c.key }

// Holder returns this client's holder identity.
func (c *Client) Holder() string { return c.opts.Holder }

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

// fenced reports an object written through package fence: data guarded by
// a token, never a lease record, whatever its bytes say.
func (c *Client) fenced(md map[string]string) error {
	tok, ok := md[fencemeta.TokenKey]
	if !ok {
		return nil
	}
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		tok = strconv.Quote(tok)
	}
	what := fmt.Sprintf("a fenced data object (written through fence with token %s)", tok)
	if md[fencemeta.TombstoneKey] == "true" {
		what = fmt.Sprintf("a fenced tombstone (deleted through fence with token %s)", tok)
	}
	return &RecordError{Key: c.key, Err: ErrFencedObject, Reason: "object is " + what + ", not a lease record"}
}

// tokenBase returns the token that the next one must be above, for a write
// over what o saw (nil or absent: nothing; a record; or, with Force, an
// object that is not one): the highest of the record's token or the bad
// object's readable one, the highest this client has seen at the key, and
// the floor the options give (see floor). Over a bad object that nothing
// gives a token for, it refuses (see tokenUnknown): objlease never sends a
// token back.
func (c *Client) tokenBase(ctx context.Context, o *observation) (uint64, error) {
	if err := c.tokenUnknown(o); err != nil {
		return 0, err
	}
	seen := c.highestSeen()
	base := seen
	if o != nil && o.rec != nil {
		base = max(base, o.rec.Token)
	} else if o != nil {
		base = max(base, o.badToken) // 0 if absent
	}
	floor, err := c.floor(ctx)
	if err != nil {
		return 0, err
	}
	if o != nil && o.rec == nil && !o.absent() {
		c.log.Warn("forcing over an object that is not a valid record", slog.Uint64("recovered_token", max(base, floor)),
			slog.Uint64("object_token", o.badToken), slog.Uint64("seen_token", seen), slog.Uint64("floor", floor))
	}
	return max(base, floor), nil
}

// tokenUnknown returns a *TokenError if o is an object that is not a
// valid record (which only Force replaces) and nothing shows a token to
// continue above: the object carries none, this client has seen none at
// the key, and the options give no floor. It sends no request, so that a
// forced acquire refuses at once rather than after waiting the object out.
func (c *Client) tokenUnknown(o *observation) error {
	if o == nil || o.absent() || o.rec != nil || o.badToken > 0 || c.highestSeen() > 0 ||
		c.opts.MinToken != nil || len(c.opts.FencedKeys) > 0 {
		return nil
	}
	why := "is not a valid lease record"
	if o.bad != nil {
		if errors.Is(o.bad.Err, ErrNewerSchema) {
			why = "is a lease record of a newer schema"
		}
		why += " (" + o.bad.Reason + ")"
	}
	return &TokenError{Key: c.key, Reason: "the object at the key " + why +
		" and shows no token, nor does anything else; replacing it could hand out again a token that a paused holder still has"}
}

// floor returns the highest token the options show: Options.MinToken and
// the token of each of Options.FencedKeys (one Stat each). A named key
// that shows no token is an error: it was named as evidence.
func (c *Client) floor(ctx context.Context) (uint64, error) {
	var f uint64
	if c.opts.MinToken != nil {
		f = *c.opts.MinToken
	}
	for _, k := range c.opts.FencedKeys {
		a, err := c.store.Stat(ctx, k)
		if errors.Is(err, providers.ErrNotFound) {
			return 0, &TokenError{Key: c.key, Fenced: k, Reason: fmt.Sprintf("the fenced object %q named as evidence does not exist", k)}
		}
		if err != nil {
			return 0, fmt.Errorf("lease %q: reading the token of fenced object %q: %w", c.key, k, err)
		}
		s, ok := a.Metadata[fencemeta.TokenKey]
		if !ok {
			return 0, &TokenError{Key: c.key, Fenced: k, Reason: fmt.Sprintf("the object %q named as a fenced object carries no %s metadata: it was not written through fence", k, fencemeta.TokenKey)}
		}
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, &TokenError{Key: c.key, Fenced: k, Reason: fmt.Sprintf("the fenced object %q has metadata %s=%q, which is not a token", k, fencemeta.TokenKey, s)}
		}
		f = max(f, t)
	}
	return f, nil
}

// nextToken returns the token after t, refusing to wrap around to 0.
func (c *Client) nextToken(t uint64) (uint64, error) {
	if t == math.MaxUint64 {
		return 0, fmt.Errorf("lease %q: %w: token %d is the largest a token can be; the next one would wrap around to 0, which fenced resources would take for a stale holder's",
			c.key, ErrTokenExhausted, t)
	}
	return t + 1, nil
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
		rerr := &RecordError{Key: c.key, Reason: fmt.Sprintf("object is larger than %d bytes", MaxRecordSize), Err: ErrBadRecord}
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

// observedWait is how much longer, from now, a version first seen at since
// must be seen unchanged before a writer promising ttl can have stopped
// relying on it.
func (c *Client) observedWait(ttl time.Duration, since, now time.Time) time.Duration {
	if !driftMargin() {
		return ttl - now.Sub(since)
	}
	return time.Duration(float64(ttl)*(1+c.opts.DriftBound)) - now.Sub(since)
}

// forceWait is how much longer Force must see the bad object of o unchanged
// before it replaces it: it may be the record of a live holder (a newer
// objlease's, or one whose token was rewritten), which must keep its time.
func (c *Client) forceWait(o *observation, now time.Time) time.Duration {
	if !forceWaits() {
		return 0
	}
	return c.observedWait(o.badTTL, o.since, now)
}

// expiresIn reports how long, from now, o's record stays unexpired for this
// client (<= 0: expired or free).
func (c *Client) expiresIn(o *observation, now time.Time) time.Duration {
	d, _ := c.expiry(o, now)
	return d
}

// expiry is the one expiry rule: how long, from now, o's record stays
// unexpired for this client (<= 0: expired or free), and which rule
// decided it ("" for a free key).
func (c *Client) expiry(o *observation, now time.Time) (time.Duration, Rule) {
	if o.rec == nil || o.rec.State == StateReleased {
		return 0, ""
	}
	ttl := o.rec.TTL()
	wait, rule := c.observedWait(ttl, o.since, now), RuleObserved
	if r := c.opts.StoreClock; r != nil {
		if age, ok := storeAge(o.attrs, r.Margin); ok {
			limit := ttl + c.store.Properties().TimestampGranularity + r.Margin
			if byStore := limit - age; byStore < wait {
				// The store's clock has already seen part (or all) of the
				// TTL pass since the record was written.
				wait, rule = max(byStore, 0), RuleStoreClock
			}
		}
	}
	return wait, rule
}

// Sane store timestamps, for storeAge.
var (
	saneFrom = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	saneTo   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// maxStoreAge is the oldest record age the store-clock rule believes: an
// older one says more about the store's clocks than about the record.
const maxStoreAge = 10 * 365 * 24 * time.Hour

// storeAge is a record's age by the store's clock (its Date minus the
// record's Last-Modified), if the store reported both and they make sense:
// both from 1970 to 2200, and the age from −margin (the store's clocks may
// disagree by that much) to maxStoreAge. Anything else is unknown, which
// leaves the observed-time rule to decide: a lying store clock may delay a
// takeover, never hasten one, and no arithmetic on its values can wrap.
func storeAge(a providers.Attrs, margin time.Duration) (time.Duration, bool) {
	for _, t := range []time.Time{a.LastModified, a.StoreTime} {
		if t.Before(saneFrom) || !t.Before(saneTo) {
			return 0, false
		}
	}
	age := a.StoreTime.Sub(a.LastModified)
	if age < -margin || age > maxStoreAge {
		return 0, false
	}
	return age, true
}

// TryAcquire makes one attempt to take the lease. It returns a *HeldError
// (errors.Is ErrHeld) when someone else holds it and it has not expired for
// this client. Calling it again later, on the same Client, is how a caller
// waits out a dead holder's TTL; Acquire does that for you.
//
// On success the lease is renewed in the background until Release or loss.
func (c *Client) TryAcquire(ctx context.Context) (*Lease, error) {
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
		} else if view.rec == nil && c.forceWait(view, now) > 0 {
			// With Force, not a record, and not yet seen unchanged for long.
			return nil, &HeldError{Key: c.key, Holder: view.badHolder, Token: view.badToken, Wait: c.forceWait(view, now), Bad: view.bad}
		} else if view.rec == nil || c.expiresIn(view, now) <= 0 {
			// Expired, released, or (with Force) a bad object seen unchanged
			// for its TTL.
			l, err := c.write(ctx, view)
			if err == nil || !errors.Is(err, providers.ErrPrecondition) || attempt > 2 {
				return l, err
			}
			// Someone else wrote first; look again.
		} else {
			return nil, &HeldError{Key: c.key, Holder: view.rec.Holder, Token: view.rec.Token, Data: view.rec.Data, Wait: c.expiresIn(view, c.opts.Clock.Now())}
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
	ifVersion := ""
	if o != nil {
		ifVersion = o.version // "" if absent: create
	}
	base, err := c.tokenBase(ctx, o)
	if err != nil {
		return nil, err
	}
	token, err := c.nextToken(base)
	if err != nil {
		return nil, err
	}
	rec := &Record{
		Schema:    SchemaVersion,
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
	res, _, err := c.putTracked(ctx, rec, ifVersion)
	return res, err
}

// putTracked is put; uncertain reports that an attempt's outcome was
// unknown, so that it may have landed even if put reports a refusal.
func (c *Client) putTracked(ctx context.Context, rec *Record, ifVersion string) (_ providers.WriteResult, uncertain bool, _ error) {
	body, err := encodeRecord(rec)
	if err != nil {
		return providers.WriteResult{}, false, err
	}
	for attempt := 1; ; attempt++ {
		var res providers.WriteResult
		if ifVersion == "" {
			res, err = c.store.Create(ctx, c.key, body, nil)
		} else {
			res, err = c.store.Replace(ctx, c.key, body, nil, ifVersion)
		}
		if err == nil {
			c.mu.Lock()
			c.view = &observation{version: res.Version, rec: rec, since: c.opts.Clock.Now(), mine: true}
			c.highest = max(c.highest, rec.Token)
			c.mu.Unlock()
			return res, uncertain, nil
		}
		// A retry refused: perhaps by an earlier attempt that landed late.
		lateOwn := attempt > 1 && errors.Is(err, providers.ErrPrecondition)
		if !lateOwn && !errors.Is(err, providers.ErrUnknownOutcome) && !errors.Is(err, providers.ErrConflict) {
			return res, uncertain, err
		}
		uncertain = uncertain || errors.Is(err, providers.ErrUnknownOutcome)
		if errors.Is(err, providers.ErrConflict) {
			// Nothing was written: a racing write to the record held it.
			c.log.Info("write refused by a racing write; re-reading", slog.Any("err", err))
		} else {
			c.log.Warn("write outcome unknown; re-reading", slog.Any("err", err))
		}
		if !nonceCheck() {
			return providers.WriteResult{}, uncertain, nil // assume it landed
		}
		res, landed, rerr := c.resolve(ctx, rec, ifVersion, err)
		if rerr != nil || landed {
			return res, uncertain, rerr
		}
		if attempt == 3 {
			return res, uncertain, err
		}
		if errors.Is(err, providers.ErrConflict) {
			// The racing write is still being applied (S3: "a conflicting
			// conditional operation is in progress"): give it the time to
			// land, so that the next attempt finds it rather than racing
			// it again.
			if err := sleep(ctx, goTimers, c.jitter(conflictWait<<(attempt-1))); err != nil {
				return res, uncertain, err
			}
		}
	}
}

// conflictWait is the first wait after a write refused by a racing one
// still in flight; it doubles with each attempt. It is network time, not
// lease time (it decides nothing about expiry): it runs on Go's timers,
// which a synctest bubble fakes, not on Options.Clock, which a test may
// never advance.
const conflictWait = 30 * time.Millisecond

// resolve re-reads the record until it can tell whether the write of rec,
// made over ifVersion, landed: the record then carries rec's holder and
// nonce. It reports landed = false with no error if the record is as it was
// before the write (so it can be retried), and ErrPrecondition if someone
// else's write is there instead.
func (c *Client) resolve(ctx context.Context, rec *Record, ifVersion string, cause error) (providers.WriteResult, bool, error) {
	backoff := 50 * time.Millisecond
	for {
		o, err := c.read(ctx)
		if err == nil {
			switch {
			case o.rec != nil && o.rec.Nonce == rec.Nonce && (o.rec.Holder == rec.Holder || !ownWriteCheck()):
				return providers.WriteResult{Version: o.version, LastModified: o.attrs.LastModified, StoreTime: o.attrs.StoreTime}, true, nil
			case o.version == ifVersion: // unchanged ("" == absent for a create)
				return providers.WriteResult{}, false, nil
			}
			return providers.WriteResult{}, false, fmt.Errorf("%w (after %v)", providers.ErrPrecondition, cause)
		}
		var re *RecordError
		if errors.As(err, &re) {
			return providers.WriteResult{}, false, err
		}
		if IsPermanent(err) {
			// Re-reading again will not succeed either: a missing bucket or
			// refused credentials stay so.
			return providers.WriteResult{}, false, fmt.Errorf("lease %q: %w: %w; re-reading: %w", c.key, ErrAmbiguous, cause, err)
		}
		if sleep(ctx, c.opts.Clock, backoff) != nil {
			return providers.WriteResult{}, false, fmt.Errorf("lease %q: %w: %w", c.key, ErrAmbiguous, cause)
		}
		backoff = min(2*backoff, time.Second)
	}
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

// retry decides, for a loop of acquire attempts, whether and when to try
// again after an error. Its zero value is ready for use. It is how Acquire
// and every other waiting loop (see Await) treat errors alike.
type retry struct {
	failures int // store failures in a row
}

// next returns how long to wait after err before the next attempt, given
// poll, the wait while the lease is held, and whether to try again at all.
// A held lease waits poll, or until its holder's record is due to expire;
// a race with another writer or throttling waits poll; a store failure
// waits with backoff from 100 ms up to poll; a permanent error is not
// retried.
func (r *retry) next(err error, poll time.Duration) (time.Duration, bool) {
	var held *HeldError
	switch {
	case errors.As(err, &held):
		r.failures = 0
		if held.Wait < poll {
			return held.Wait + time.Millisecond, true
		}
		return poll, true
	case errors.Is(err, ErrNotYet):
		r.failures = 0
		return poll, true
	case errors.Is(err, providers.ErrThrottled), errors.Is(err, providers.ErrConflict),
		errors.Is(err, providers.ErrUnknownOutcome), errors.Is(err, providers.ErrPrecondition):
		return poll, true
	case IsPermanent(err):
		return 0, false
	}
	r.failures++
	return min(100*time.Millisecond<<min(r.failures-1, 10), max(poll, 100*time.Millisecond)), true
}

// first reports whether the error next last saw began a streak of store
// failures: the one to log.
func (r *retry) first() bool { return r.failures == 1 }

// IsPermanent reports errors that waiting will not cure: the object at the
// key is not a usable record (or, with Force, shows no token to continue
// above), the options or key are invalid, a write's outcome could not be
// determined, the client's session is closed, or the store refuses the
// request as configured (missing bucket, refused credentials, wrong
// endpoint, an operation it does not support).
func IsPermanent(err error) bool {
	return errors.Is(err, ErrBadRecord) || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrInvalidOptions) ||
		errors.Is(err, ErrFencedObject) || errors.Is(err, ErrTokenExhausted) || errors.Is(err, ErrTokenUnknown) ||
		errors.Is(err, providers.ErrInvalidKey) || errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrSessionClosed) ||
		errors.Is(err, providers.ErrNoBucket) || errors.Is(err, providers.ErrPermission) ||
		errors.Is(err, providers.ErrWrongEndpoint) || errors.Is(err, errors.ErrUnsupported)
}

// Status is what Inspect reports.
type Status struct {
	Key     string
	Version string
	Record  *Record // nil if the key is absent
	Attrs   providers.Attrs
	// ExpiresIn is how long this client must still see the record unchanged
	// before it may take over (0: expired or free). For a client that has
	// just looked for the first time this is the full TTL × (1 + drift).
	ExpiresIn time.Duration
	// StoreAge is the record's age by the store's own clock (Date minus
	// Last-Modified), when the store reports both; else negative.
	StoreAge time.Duration
	// Expired reports a held record that has expired for this client
	// (ExpiresIn is 0): it may take the lease over now.
	Expired bool
	// Rule is the rule that decided ExpiresIn for a held record: the
	// observed rule, or the store's clock (Options.StoreClock) when it
	// allows a takeover sooner.
	Rule Rule
	// Age is how long ago the record was written, never negative: by the
	// store's clock when AgeByStore, else by this machine's clock against
	// the writer's WrittenAt, which is only as good as the two clocks'
	// agreement and decides nothing.
	Age        time.Duration
	AgeByStore bool
}

// Inspect reads the lease without changing it.
func (c *Client) Inspect(ctx context.Context) (*Status, error) {
	if err := c.sess.err(c.key); err != nil {
		return nil, err
	}
	o, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status(o, c.opts.Clock.Now()), nil
}

// status reports o as judged at now (c.mu held).
func (c *Client) status(o *observation, now time.Time) *Status {
	st := &Status{Key: c.key, Version: o.version, Record: o.rec, Attrs: o.attrs, StoreAge: -1}
	if !o.attrs.LastModified.IsZero() && !o.attrs.StoreTime.IsZero() {
		st.StoreAge = o.attrs.StoreTime.Sub(o.attrs.LastModified)
	}
	if o.rec != nil {
		in, rule := c.expiry(o, now)
		st.ExpiresIn, st.Rule = max(in, 0), rule
		st.Expired = o.rec.State == StateHeld && in <= 0
		if !o.attrs.LastModified.IsZero() && !o.attrs.StoreTime.IsZero() {
			st.Age, st.AgeByStore = max(st.StoreAge, 0), true
		} else {
			st.Age = max(time.Since(o.rec.WrittenAt), 0)
		}
	}
	return st
}

// Sighting is what a listing tells a Client about its lease (see Observe).
type Sighting struct {
	// Unchanged is how long this client has seen the listed version
	// unchanged, from its first sighting in a listing or a read.
	Unchanged time.Duration
	// Status is the last read's status judged now (ExpiresIn counted from
	// the version's first sighting, as Inspect would), if the listed
	// version is the one last read; nil if this client has not read that
	// version, whose contents it therefore does not know.
	Status *Status
}

// Observe notes that a listing (a List page of the lease's store) showed
// the lease's object at a.Version, without reading it. A version first
// seen in a listing counts as seen from then on: a read that later finds
// it judges its expiry from the listing, so that a reader that lists every
// round and reads only now and then takes over from a holder that stopped
// renewing as early as one that reads every round. Call it only after the
// listing returned (the version existed by then). Observe sends no
// request.
func (c *Client) Observe(a providers.Attrs) Sighting {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.view; o != nil && o.rec != nil && o.version == a.Version {
		return Sighting{Unchanged: now.Sub(o.since), Status: c.status(o, now)}
	}
	if c.listed == nil || c.listed.version != a.Version {
		c.listed = &observation{version: a.Version, since: now}
	}
	return Sighting{Unchanged: now.Sub(c.listed.since)}
}

// Break ends the lease whatever its state: it writes a released record whose
// token is one higher than the current one, so that a fenced resource that
// sees the new token refuses the old holder. It returns the new token. An
// object that is not a valid record is only replaced with Options.Force,
// and only if a token to continue above can be found (see Options.Force):
// else Break returns a *TokenError (ErrTokenUnknown). The new token is
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
		rec := &Record{Schema: SchemaVersion, Name: c.key, Nonce: c.nonce(), State: StateReleased,
			TTLMillis: c.opts.TTL.Milliseconds(), WrittenAt: time.Now().UTC()}
		if o.rec != nil {
			rec.TTLMillis = o.rec.TTLMillis
		}
		base, err := c.tokenBase(ctx, o)
		if err != nil {
			return 0, err
		}
		if rec.Token, err = c.nextToken(base); err != nil {
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
// that acquired it (the CLI's release command). It returns a *HeldError if
// someone else holds it, and nil if it is already released.
func (c *Client) Release(ctx context.Context) error {
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
		return &HeldError{Key: c.key, Holder: o.rec.Holder, Token: o.rec.Token, Data: o.rec.Data, Wait: c.expiresIn(o, c.opts.Clock.Now())}
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
func (c *Client) Options() Options { return c.opts }

// wait blocks for d on the client's clock, or until ctx ends.
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	return sleep(ctx, c.opts.Clock, d)
}
