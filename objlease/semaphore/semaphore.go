// Package semaphore is a counting lease: at most N holders at once, in the
// spirit of etcd's concurrency package and `consul lock -n`. It is built from
// N ordinary leases, the slots, stored next to each other:
//
//	PREFIX/size     {"objlease_semaphore":1,"slots":N}: the agreed N
//	PREFIX/slot-0   a lease record, exactly as objlease writes it
//	...
//	PREFIX/slot-<N-1>
//
// Acquiring the semaphore means acquiring any one slot. Each slot is a
// separate lease with its own fencing token, so a resource shared by the
// holders must be fenced per slot: the caller gets the slot's index and its
// token. docs/semaphore.md gives the safety argument and what to do when N
// changes.
package semaphore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// MaxSlots bounds N, so that one poll of a full semaphore stays a bounded
// number of requests.
const MaxSlots = 1000

var (
	// ErrSizeMismatch: the semaphore's recorded size is not the N this
	// process was configured with, or a slot this process acquired is no
	// longer below the recorded size (the semaphore was shrunk). The error
	// is a *SizeError.
	ErrSizeMismatch = errors.New("semaphore size mismatch")
	// ErrDraining: Resize shrank the semaphore, but slots at or above the
	// new size are still held; until they are released or expire, the old,
	// larger limit still applies. The error is a *DrainError.
	ErrDraining = errors.New("semaphore slots above its size still held")
)

// SizeError reports a size that disagrees with the recorded one.
type SizeError struct {
	Key       string // the size object
	Recorded  int
	Requested int // this process's N
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("semaphore %q: recorded size is %d slots, this process uses %d (every process must use the same size)",
		e.Key, e.Recorded, e.Requested)
}

// Unwrap makes errors.Is(err, ErrSizeMismatch) true, and
// errors.Is(err, objlease.ErrInvalidOptions): this process's N is not the
// semaphore's, which waiting does not cure (objlease.IsPermanent).
func (e *SizeError) Unwrap() []error { return []error{ErrSizeMismatch, objlease.ErrInvalidOptions} }

// DrainError lists the slots that must still be released or expire after a
// shrinking Resize.
type DrainError struct {
	Prefix string
	Size   int
	Held   []*objlease.Error // one per slot at or above Size still held
}

func (e *DrainError) Error() string {
	keys := make([]string, len(e.Held))
	for i, h := range e.Held {
		keys[i] = strconv.Quote(h.Key)
	}
	return fmt.Sprintf("semaphore %q: shrunk to %d slots, but %d slot(s) above still held: %v; resize again once they are released or expired",
		e.Prefix, e.Size, len(e.Held), keys)
}

// Unwrap makes errors.Is(err, ErrDraining) true.
func (e *DrainError) Unwrap() error { return ErrDraining }

// Semaphore is a counting lease of N slots under one prefix. It is safe for
// concurrent use; each Acquire returns a different slot.
type Semaphore struct {
	sess   *objlease.Session
	store  providers.Store
	prefix string
	opts   objlease.Options // effective options of slot 0 (defaults filled in)
	clock  clock.Clock
	log    *slog.Logger

	mu      sync.Mutex
	n       int
	checked bool               // the recorded size was seen to be n
	clients []*objlease.Client // one per slot index, grown on demand
	rnd     *rand.Rand
}

// sizeDoc is the size object.
type sizeDoc struct {
	Schema int `json:"objlease_semaphore"`
	Slots  int `json:"slots"`
}

// New returns a semaphore of n slots under prefix in the session's store,
// whose slots are held through sess. opts apply to every slot: the same
// holder identity (defaulted once) and timings. The clock, the logger and
// the jitter are the session's; the first slot an attempt tries is drawn
// from a source seeded from the session's (Session.NewRand). New does no
// I/O; the size is checked on first use.
func New(sess *objlease.Session, prefix string, n int, opts objlease.Options) (*Semaphore, error) {
	for len(prefix) > 0 && prefix[len(prefix)-1] == '/' {
		prefix = prefix[:len(prefix)-1]
	}
	switch {
	case sess == nil:
		return nil, fmt.Errorf("%w: nil session", objlease.ErrInvalidOptions)
	case prefix == "":
		return nil, fmt.Errorf("%w: empty semaphore prefix", objlease.ErrInvalidOptions)
	case n < 1 || n > MaxSlots:
		return nil, fmt.Errorf("%w: semaphore %q: %d slots, want 1 to %d", objlease.ErrInvalidOptions, prefix, n, MaxSlots)
	}
	s := &Semaphore{sess: sess, prefix: prefix, n: n, rnd: sess.NewRand()}
	s.opts = opts
	c0, err := s.newClient(0)
	if err != nil {
		return nil, err
	}
	// Every slot writes the same holder identity, defaulted once.
	s.opts = c0.Options()
	s.store, s.clock = c0.Store(), sess.Clock()
	s.log = sess.Logger().With(slog.String("semaphore", prefix), slog.String("holder", s.opts.Holder))
	s.clients = []*objlease.Client{c0}
	return s, nil
}

// newClient makes the lease client of slot i.
func (s *Semaphore) newClient(i int) (*objlease.Client, error) {
	return s.sess.Client(SlotKey(s.prefix, i), s.opts)
}

// client returns slot i's client; s.mu must be held.
func (s *Semaphore) client(i int) (*objlease.Client, error) {
	for len(s.clients) <= i {
		c, err := s.newClient(len(s.clients))
		if err != nil {
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	return s.clients[i], nil
}

// SlotKey returns the key of slot i of the semaphore at prefix.
func SlotKey(prefix string, i int) string { return prefix + "/slot-" + strconv.Itoa(i) }

// SizeKey returns the key of the size object of the semaphore at prefix.
func SizeKey(prefix string) string { return prefix + "/size" }

// Prefix returns the semaphore's prefix.
func (s *Semaphore) Prefix() string { return s.prefix }

// Size returns the number of slots this semaphore uses.
func (s *Semaphore) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Holder returns the holder identity written in every slot.
func (s *Semaphore) Holder() string { return s.opts.Holder }

// readSize reads the size object: 0 if it is absent.
func (s *Semaphore) readSize(ctx context.Context) (int, string, error) {
	key := SizeKey(s.prefix)
	obj, err := s.store.Get(ctx, key, 4<<10)
	if errors.Is(err, providers.ErrNotFound) {
		return 0, "", nil
	}
	if errors.Is(err, providers.ErrTooLarge) {
		return 0, "", &objlease.Error{Key: key, Err: objlease.ErrBadRecord, Reason: "object is too large to be a semaphore size"}
	}
	if err != nil {
		return 0, "", err
	}
	var d sizeDoc
	dec := json.NewDecoder(bytes.NewReader(obj.Data))
	dec.DisallowUnknownFields()
	// A bad object's version is returned too, so that Force replaces
	// exactly the object that was judged.
	switch err := dec.Decode(&d); {
	case err != nil:
		return 0, obj.Version, &objlease.Error{Key: key, Err: objlease.ErrBadRecord, Reason: fmt.Sprintf("not a semaphore size: %v", err)}
	case d.Schema > 1:
		return 0, obj.Version, &objlease.Error{Key: key, Err: objlease.ErrNewerSchema, Reason: fmt.Sprintf("schema %d, this objlease reads 1", d.Schema)}
	case d.Schema < 1 || d.Slots < 1 || d.Slots > MaxSlots:
		return 0, obj.Version, &objlease.Error{Key: key, Err: objlease.ErrBadRecord, Reason: fmt.Sprintf("schema %d, %d slots: not a semaphore size", d.Schema, d.Slots)}
	}
	return d.Slots, obj.Version, nil
}

func encodeSize(n int) []byte {
	b, _ := json.Marshal(sizeDoc{Schema: 1, Slots: n})
	return b
}

// checkSize makes sure the recorded size is this semaphore's n, recording
// it if there is none yet. Once seen, it is not read again here: a Resize
// elsewhere is caught when a slot is acquired (see confirm).
func (s *Semaphore) checkSize(ctx context.Context) error {
	s.mu.Lock()
	n, checked := s.n, s.checked
	s.mu.Unlock()
	if checked {
		return nil
	}
	for attempt := 0; ; attempt++ {
		got, version, err := s.readSize(ctx)
		var bad *objlease.Error // the size object is not one
		if errors.As(err, &bad) && s.opts.Force && version != "" && attempt < 3 {
			s.log.Warn("forcing over an object that is not a semaphore size", slog.Any("err", err))
			_, err = s.store.Replace(ctx, SizeKey(s.prefix), encodeSize(n), nil, version)
			if err == nil || errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrUnknownOutcome) {
				continue // read what is there now
			}
		}
		if err != nil {
			return err
		}
		if got == 0 {
			_, err = s.store.Create(ctx, SizeKey(s.prefix), encodeSize(n), nil)
			if err == nil {
				s.log.Info("semaphore size recorded", slog.Int("slots", n))
				got = n
			} else if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrUnknownOutcome) || errors.Is(err, providers.ErrConflict) {
				// Someone else recorded a size first, or our own create may
				// have landed: the content says which size won.
				if attempt < 3 {
					continue
				}
				return err
			} else {
				return err
			}
		}
		if got != n {
			return &SizeError{Key: SizeKey(s.prefix), Recorded: got, Requested: n}
		}
		s.mu.Lock()
		s.checked = s.n == n
		s.mu.Unlock()
		return nil
	}
}

// Slot is one held slot of a semaphore: an objlease.Lease (Token, Context,
// Done, Renew, ValidFor, Release, ...) plus its index.
type Slot struct {
	*objlease.Lease
	index int
}

// Index returns the slot's index, in [0, N). Fence per slot: a resource
// shared by the holders remembers the highest token per index.
func (s *Slot) Index() int { return s.index }

// TryAcquire makes one attempt at every slot, starting at a random one so
// that contenders spread out. It returns an error matching objlease.ErrHeld,
// whose *objlease.Error (ErrHeld) names the slot due to expire first for this
// semaphore, if every slot is held. An object at a slot that is not a valid
// record is reported (an *objlease.Error) and left alone, unless
// another slot could be taken.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Slot, error) {
	slot, held, err := s.attempt(ctx)
	switch {
	case slot != nil:
		return slot, nil
	case err != nil:
		return nil, err
	}
	return nil, fmt.Errorf("semaphore %q: all %d slots held: %w", s.prefix, s.Size(), held)
}

// attempt tries every slot once. Without a slot it returns the held slot
// due to expire first, and the most serious other error met, if any.
func (s *Semaphore) attempt(ctx context.Context) (*Slot, *objlease.Error, error) {
	if err := s.checkSize(ctx); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	n := s.n
	start := s.rnd.IntN(n)
	clients := make([]*objlease.Client, n)
	for i := range n {
		c, err := s.client(i)
		if err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
		clients[i] = c
	}
	s.mu.Unlock()

	var earliest *objlease.Error
	var failed error
	for k := range n {
		i := (start + k) % n
		l, err := clients[i].TryAcquire(ctx)
		var held *objlease.Error
		switch {
		case err == nil:
			slot, err := s.confirm(ctx, i, l)
			if err != nil {
				return nil, nil, err
			}
			if failed != nil {
				s.log.Warn("slot unusable; acquired another", slog.Any("err", failed))
			}
			return slot, nil, nil
		case errors.As(err, &held) && held.Err == objlease.ErrHeld:
			if earliest == nil || held.Wait < earliest.Wait {
				earliest = held
			}
		case ctx.Err() != nil:
			return nil, nil, err
		case failed == nil || (objlease.IsPermanent(err) && !objlease.IsPermanent(failed)):
			failed = err
		}
	}
	return nil, earliest, failed
}

// confirm checks, after slot i was taken, that i is still below the
// recorded size. A Resize that shrinks writes the size before it checks
// the slots above it, so an acquisition it does not see reads the new
// size here and gives the slot back. Slot 0 always exists.
func (s *Semaphore) confirm(ctx context.Context, i int, l *objlease.Lease) (*Slot, error) {
	if i > 0 {
		got, _, err := s.readSize(ctx)
		if err == nil && got <= i {
			err = &SizeError{Key: SizeKey(s.prefix), Recorded: got, Requested: s.Size()}
		}
		if err != nil {
			if rerr := l.Release(ctx); rerr != nil {
				s.log.Warn("giving back a slot failed; it will expire", slog.Int("slot", i), slog.Any("err", rerr))
			}
			return nil, err
		}
	}
	return &Slot{Lease: l, index: i}, nil
}

// Acquire waits until it holds a slot or ctx ends, in objlease.Await on
// slot 0's schedule: while every slot is held it polls every PollInterval
// (jittered), or sooner when the slot due to expire first for this
// semaphore does, and, with one slot, reads on its holder's renewal phase
// as Client.Acquire does. A poll of a full semaphore costs one read per
// slot. Errors that waiting cannot cure (objlease.IsPermanent: a missing
// bucket, refused credentials, a slot that is not a lease record, a size
// other than the recorded one) end it at once.
func (s *Semaphore) Acquire(ctx context.Context) (*Slot, error) {
	return s.AcquireReporting(ctx, nil)
}

// AcquireReporting is Acquire, calling progress (if not nil) after every
// attempt that took no slot, as objlease.Await does: Progress.Held names
// the slot due to expire first, its holder and token, and Takeover when
// it could first be taken over.
func (s *Semaphore) AcquireReporting(ctx context.Context, progress func(objlease.Progress)) (*Slot, error) {
	s.mu.Lock()
	c := s.clients[0]
	s.mu.Unlock()
	return objlease.Await(ctx, c, s.TryAcquire, progress)
}

// Status is what Inspect reports.
type Status struct {
	Prefix string
	// Recorded is the size in the size object; 0 if there is none yet.
	Recorded int
	// Slots are the slots up to the larger of the recorded size and this
	// semaphore's, in index order.
	Slots []*objlease.Status
}

// Held returns the indexes of the slots whose records say they are held.
func (st *Status) Held() []int {
	var held []int
	for i, sl := range st.Slots {
		if sl.Record != nil && sl.Record.State == objlease.StateHeld {
			held = append(held, i)
		}
	}
	return held
}

// Inspect reads the size and every slot without changing anything.
func (s *Semaphore) Inspect(ctx context.Context) (*Status, error) {
	got, _, err := s.readSize(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{Prefix: s.prefix, Recorded: got}
	s.mu.Lock()
	n := max(s.n, got)
	clients := make([]*objlease.Client, n)
	for i := range n {
		if clients[i], err = s.client(i); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.Unlock()
	for _, c := range clients {
		sl, err := c.Inspect(ctx)
		if err != nil {
			return nil, err
		}
		st.Slots = append(st.Slots, sl)
	}
	return st, nil
}

// Resize records n as the semaphore's size, and makes it this semaphore's.
// Growing takes effect at once. Shrinking writes the new size first, so
// that no acquisition after it keeps a slot at or above n (see confirm),
// then checks those slots: while any is held (released, absent or expired
// for this semaphore counts as free) it returns a *DrainError, and the old
// size still bounds the holders. Call it again, on the same Semaphore so
// that it can see a dead holder's slot expire, until it returns nil.
// Processes still configured with the old size get ErrSizeMismatch when
// they start; restart them with the new one.
func (s *Semaphore) Resize(ctx context.Context, n int) error {
	if n < 1 || n > MaxSlots {
		return fmt.Errorf("%w: semaphore %q: %d slots, want 1 to %d", objlease.ErrInvalidOptions, s.prefix, n, MaxSlots)
	}
	var old int
	for attempt := 0; ; attempt++ {
		got, version, err := s.readSize(ctx)
		if err != nil {
			return err
		}
		old = got
		if got == n {
			break
		}
		if got == 0 {
			_, err = s.store.Create(ctx, SizeKey(s.prefix), encodeSize(n), nil)
		} else {
			_, err = s.store.Replace(ctx, SizeKey(s.prefix), encodeSize(n), nil, version)
		}
		if err == nil {
			s.log.Warn("semaphore resized", slog.Int("from", got), slog.Int("to", n))
			break
		}
		// Refused, raced or unknown: the content read next says what is there.
		if !errors.Is(err, providers.ErrPrecondition) && !errors.Is(err, providers.ErrUnknownOutcome) &&
			!errors.Is(err, providers.ErrConflict) || attempt > 3 {
			return err
		}
	}
	s.mu.Lock()
	above := max(old, s.n)
	s.n, s.checked = n, true
	clients := make([]*objlease.Client, 0, max(above-n, 0))
	for i := n; i < above; i++ {
		c, err := s.client(i)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		clients = append(clients, c)
	}
	s.mu.Unlock()
	// Slots above the old size too may still be held, from an earlier
	// shrink that was not drained: check up to the larger of both.
	var held []*objlease.Error
	for _, c := range clients {
		st, err := c.Inspect(ctx)
		if err != nil {
			return err
		}
		if st.Record != nil && st.Record.State == objlease.StateHeld && st.ExpiresIn > 0 {
			held = append(held, &objlease.Error{Key: st.Key, Err: objlease.ErrHeld, Record: st.Record, Wait: st.ExpiresIn})
		}
	}
	if len(held) > 0 {
		return &DrainError{Prefix: s.prefix, Size: n, Held: held}
	}
	return nil
}
