// Package tick runs a scheduled job at most once per tick of its schedule.
//
// Schedulers deliver at least once: Cloud Scheduler and Pub/Sub may deliver
// one trigger twice, late and out of order, and a Kubernetes CronJob may
// start one schedule twice. A lease alone lets the second trigger run the
// job again as soon as the first has released it. A tick is one period of
// the schedule (Of) or an id the scheduler gives; once a holder's job has
// succeeded for it, the mark says so, and any later trigger of the same
// tick finds it there and does not run the job.
//
// # The mark
//
// The mark is one object beside the lease (Key: KEY.tick), a fenced
// object written with the lease's token (the metadata of package fence,
// read with fence.Get): a holder whose lease was taken over cannot write
// it once a newer token has. It remembers the newest Remembered ticks
// done (a thousand), oldest first, whatever order they came in: a tick
// redelivered after later ones still finds itself done. Each write reads
// the mark, adds its tick and writes it back conditionally on the version
// it read, so ticks marked meanwhile by an earlier token are kept. A tick
// older than the newest Remembered ticks done is forgotten: a trigger of
// it runs the job again. A tick id is 1 to MaxIDBytes bytes of printable
// Unicode (CheckID), so that every mark that can be written fits in
// MaxMarkSize, the bound it is read with.
//
// A job that fails, or whose holder dies before the mark is written,
// leaves the tick open: the next trigger runs it again, under a higher
// token to fence its writes with. So a job runs at least once per tick
// that is triggered, and, once a run of it has succeeded and written the
// mark, never again for that tick while the mark remembers it.
//
// The mark's token is a floor for the lease's tokens: a lease record
// deleted or recreated by hand would otherwise start again from token 1,
// below the mark, and no holder could mark a tick done again. Floor reads
// it before the lease is acquired, for objlease.Options.MinToken; Once
// refuses to run a job under a token below the mark's (ErrBelowMark),
// which it could never mark done.
//
// # Which tick a trigger is for
//
// A period's tick is judged on the store's clock: the Last-Modified of the
// lease record the holder wrote when it acquired the lease (Now). Triggers
// on machines whose clocks disagree still agree on the tick. The tick
// names the period's start and its length (Of), so that an hour and a day
// that start together are different ticks. Periods are aligned to the
// Unix epoch: those that divide a day start at midnight UTC, weeks (168h)
// on Thursdays. Schedulers fire at a period's start, and a scheduler whose
// clock runs ahead of the store's lands just before it by the store's
// clock: a trigger within Early(period) (a quarter of the period, at most
// 30 s) before a period's start counts for that period, not the one
// before. A trigger that lands earlier than that counts for the period
// before; one that waited for the lease counts for the period in which it
// acquired it.
package tick

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
)

// Bounds of ticks and marks.
const (
	// MaxIDBytes bounds a tick id.
	MaxIDBytes = 512
	// Remembered is how many ticks a mark remembers: the newest done.
	Remembered = 1000
	// MaxMarkSize bounds the read of a mark. Every mark Done writes fits:
	// Remembered ticks of MaxIDBytes each, with their holders.
	MaxMarkSize = 2 << 20
	// MaxEarly bounds how long before a period's start a trigger counts
	// for that period (see Early).
	MaxEarly = 30 * time.Second
)

var (
	// ErrBadMark: the object where a mark belongs is not one. It is left
	// alone.
	ErrBadMark = errors.New("not an objlease tick mark")
	// ErrBadTick: a tick id that could not be remembered or shown (see
	// CheckID).
	ErrBadTick = errors.New("not a usable tick id")
	// ErrBelowMark: the lease's token is below the mark's, so its holder
	// could never mark a tick done; the lease record was deleted or
	// recreated without the mark's token as a floor (see Floor). The error
	// also matches fence.ErrStale.
	ErrBelowMark = errors.New("lease token below the tick mark's")
)

// Mark records that the job of a tick succeeded.
type Mark struct {
	Tick   string    `json:"tick"`
	Token  uint64    `json:"token"`   // the token of the lease the job ran under
	Holder string    `json:"holder"`  // who ran it
	DoneAt time.Time `json:"done_at"` // the writer's clock, for people
}

// Marks is what the mark of a lease holds.
type Marks struct {
	// Ticks are the ticks done, oldest first: the newest Remembered.
	Ticks []Mark
	// Token is the highest token that has written the mark (its fence
	// token; a fenced delete's too); 0 if none has.
	Token uint64
}

// Find returns the mark of tick, or nil if tick is not remembered done.
func (m *Marks) Find(tick string) *Mark {
	if m == nil {
		return nil
	}
	for i := len(m.Ticks) - 1; i >= 0; i-- {
		if m.Ticks[i].Tick == tick {
			return &m.Ticks[i]
		}
	}
	return nil
}

// Last returns the mark of the tick marked done last, or nil if none is.
func (m *Marks) Last() *Mark {
	if m == nil || len(m.Ticks) == 0 {
		return nil
	}
	return &m.Ticks[len(m.Ticks)-1]
}

// Check returns an error matching ErrBelowMark (and fence.ErrStale) if
// l's token is below the token that wrote the mark: l's holder could not
// mark a tick done.
func (m *Marks) Check(l *objlease.Lease) error {
	if m != nil && l.Token() < m.Token {
		return belowMark(l, m.Token)
	}
	return nil
}

// markVersion marks the object as a tick mark, as "objlease" marks a lease
// record. Version 1 held one tick.
const markVersion = 2

// markObject is a mark as stored.
type markObject struct {
	Version int    `json:"objlease_tick"`
	Nonce   string `json:"nonce,omitempty"` // unique to each write
	Ticks   []Mark `json:"ticks"`
}

// markV1 is a mark of version 1: the last tick done only.
type markV1 struct {
	Version int `json:"objlease_tick"`
	Mark
}

// Key is the key of the mark of the lease at leaseKey.
func Key(leaseKey string) string { return leaseKey + ".tick" }

// CheckID reports whether id may be a tick id: 1 to MaxIDBytes bytes of
// valid UTF-8, every character printable (letters, marks, numbers,
// punctuation, symbols, spaces: no control or format characters, no line
// or paragraph separators), without leading or trailing spaces. The error
// matches ErrBadTick.
func CheckID(id string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: a tick id is 1 to %d bytes of printable Unicode, without control characters, newlines or leading and trailing spaces",
			ErrBadTick, fmt.Sprintf(format, args...), MaxIDBytes)
	}
	switch {
	case id == "":
		return bad("the id is empty")
	case len(id) > MaxIDBytes:
		return bad("%s is %d bytes, more than %d", showID(id), len(id), MaxIDBytes)
	}
	for i, r := range id {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(id[i:]); size == 1 {
				return bad("%s is not valid UTF-8 at byte %d", showID(id), i)
			}
		}
		if !unicode.IsGraphic(r) {
			return bad("%s has the unprintable character %U at byte %d", showID(id), r, i)
		}
	}
	if strings.TrimSpace(id) != id {
		return bad("%s has a leading or trailing space", showID(id))
	}
	return nil
}

// showID is id for a message: quoted, and cut short after 64 bytes.
func showID(id string) string {
	const show = 64
	if len(id) <= show {
		return strconv.Quote(id)
	}
	cut := show
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return strconv.Quote(id[:cut]) + "…"
}

// Early is how long before the start of a period of the given length a
// trigger counts for it: a quarter of the period, at most MaxEarly.
func Early(period time.Duration) time.Duration { return min(period/4, MaxEarly) }

// Start returns the start of the period that holds t: t rounded down to a
// whole number of periods since the Unix epoch, in UTC. period must be
// positive.
func Start(t time.Time, period time.Duration) time.Time {
	if period <= 0 {
		panic(fmt.Sprintf("tick: period %v is not positive", period))
	}
	if period%time.Second == 0 {
		p, s := int64(period/time.Second), t.Unix()
		return time.Unix(s-mod(s, p), 0).UTC()
	}
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	ns.Sub(ns, new(big.Int).Mod(ns, big.NewInt(int64(period)))) // Mod is Euclidean: never negative
	sec, nsec := new(big.Int).DivMod(ns, big.NewInt(int64(time.Second)), new(big.Int))
	return time.Unix(sec.Int64(), nsec.Int64()).UTC()
}

// mod is a mod p, never negative.
func mod(a, p int64) int64 {
	r := a % p
	if r < 0 {
		r += p
	}
	return r
}

// Of returns the tick of a trigger judged at t (the store's time of its
// acquisition, Now) on a schedule of the given period: the period that
// holds t + Early(period), as its start in RFC 3339 (UTC) and its length
// as an ISO 8601 duration, "2026-12-07T00:00:00Z/PT24H". The period is
// part of the tick: an hour and a day that start together are different
// ticks. period must be positive.
func Of(t time.Time, period time.Duration) string {
	return Start(t.Add(Early(period)), period).Format(time.RFC3339Nano) + "/" + isoDuration(period)
}

// isoDuration is d (positive) as an ISO 8601 duration of hours, minutes
// and seconds: PT24H, PT1H30M, PT1.5S.
func isoDuration(d time.Duration) string {
	var b strings.Builder
	b.WriteString("PT")
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10) + "H")
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10) + "M")
		d -= m * time.Minute
	}
	if d > 0 {
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S")
	}
	return b.String()
}

// Now returns the store's time of l's last write (its Last-Modified), by
// which the tick is judged.
func Now(ctx context.Context, store providers.Store, l *objlease.Lease) (time.Time, error) {
	a, err := store.Stat(ctx, l.Key())
	if err != nil {
		return time.Time{}, err
	}
	if a.LastModified.IsZero() {
		return time.Time{}, fmt.Errorf("lease %q: the store reports no time of writing to judge the tick by", l.Key())
	}
	return a.LastModified, nil
}

// Floor returns the highest token that has written the mark of the lease
// at leaseKey (a fenced delete's too; 0 if there is none): every token the
// lease issues must be above it, or its holder could never mark a tick
// done. Pass it as objlease.Options.MinToken of the client that acquires
// the lease. It costs one Stat, which also checks that the store accepts
// the mark's key (an error matching providers.ErrInvalidKey if not).
func Floor(ctx context.Context, store providers.Store, leaseKey string) (uint64, error) {
	a, err := store.Stat(ctx, Key(leaseKey))
	if errors.Is(err, providers.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s, ok := a.Metadata[fence.TokenKey]
	if !ok {
		return 0, nil // not fenced: not a mark, which Read reports
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w at %q: metadata %s=%q is not a token; the object is left alone", ErrBadMark, Key(leaseKey), fence.TokenKey, s)
	}
	return t, nil
}

// Read returns the mark of the lease at leaseKey: empty if there is none.
func Read(ctx context.Context, store providers.Store, leaseKey string) (*Marks, error) {
	m, _, err := read(ctx, store, Key(leaseKey))
	return m, err
}

// read reads the mark at key, and returns it with the version to write
// over ("" if there is no object).
func read(ctx context.Context, store providers.Store, key string) (*Marks, string, error) {
	obj, err := store.Get(ctx, key, MaxMarkSize)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return &Marks{}, "", nil
	case errors.Is(err, providers.ErrTooLarge):
		return nil, "", foreign(key, nil, fmt.Sprintf("it is larger than any mark (%d bytes)", MaxMarkSize))
	case err != nil:
		return nil, "", err
	}
	s, fenced := obj.Metadata[fence.TokenKey]
	if !fenced {
		why := "it carries no token: it was not written as a fenced object"
		if _, err := decode(obj.Data); err != nil {
			why = err.Error()
		}
		return nil, "", foreign(key, obj.Data, why)
	}
	token, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, "", foreign(key, obj.Data, fmt.Sprintf("its metadata %s=%q is not a token", fence.TokenKey, s))
	}
	if obj.Metadata[fence.TombstoneKey] == "true" {
		return &Marks{Token: token}, obj.Version, nil // deleted through fence: no ticks
	}
	ticks, err := decode(obj.Data)
	if err != nil {
		return nil, "", foreign(key, obj.Data, err.Error())
	}
	return &Marks{Ticks: ticks, Token: token}, obj.Version, nil
}

// decode parses a mark's bytes.
func decode(b []byte) ([]Mark, error) {
	var head struct {
		Version *int `json:"objlease_tick"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Version == nil {
		return nil, errors.New(`it has no "objlease_tick" field`)
	}
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("it is not a valid mark: %v", err)
		}
		if dec.More() {
			return errors.New("it has data after the mark")
		}
		return nil
	}
	var ticks []Mark
	switch *head.Version {
	case 1:
		var m markV1
		if err := strict(&m); err != nil {
			return nil, err
		}
		ticks = []Mark{m.Mark}
	case markVersion:
		var m markObject
		if err := strict(&m); err != nil {
			return nil, err
		}
		ticks = m.Ticks
	default:
		return nil, fmt.Errorf("it is a mark of schema %d; this objlease reads up to %d", *head.Version, markVersion)
	}
	for _, t := range ticks {
		if t.Tick == "" {
			return nil, errors.New("it names an empty tick")
		}
	}
	return ticks, nil
}

// foreign is the error for the object at key (its bytes data, if read)
// that is not a mark, and why.
func foreign(key string, data []byte, why string) error {
	var rec struct {
		Schema *int   `json:"objlease"`
		Token  uint64 `json:"token"`
		Holder string `json:"holder"`
	}
	if json.Unmarshal(data, &rec) == nil && rec.Schema != nil {
		return fmt.Errorf("%w at %q: it is the record of another lease (holder %s, token %d), where this lease's tick mark belongs; it is left alone: give one of the two leases another key",
			ErrBadMark, key, strconv.Quote(rec.Holder), rec.Token)
	}
	return fmt.Errorf("%w at %q: %s; the object there is left alone (it may be another tool's): give this lease another key, or move the object away if nothing uses it",
		ErrBadMark, key, why)
}

// belowMark is the error for a lease whose token is below the mark's.
func belowMark(l *objlease.Lease, mark uint64) error {
	return fmt.Errorf("%w: lease %q has token %d, and its tick mark was written by token %d: the lease record was deleted or recreated, and no holder below token %d can mark a tick done; acquire with the mark's token as the floor (tick.Floor, Options.MinToken): %w",
		ErrBelowMark, l.Key(), l.Token(), mark, mark, &fence.StaleError{Key: Key(l.Key()), Token: l.Token(), Highest: mark})
}

// Done records that the job of tick succeeded under l, keeping the ticks
// the mark remembers (the newest Remembered). The write is fenced with l's
// token: it is refused (an error matching fence.ErrStale) if a newer token
// has written the mark. It is conditional on the version read, and read
// again if the mark changed meanwhile, so a tick marked meanwhile is kept.
// A tick already marked is left as it is.
func Done(ctx context.Context, store providers.Store, l *objlease.Lease, tick string) error {
	if err := CheckID(tick); err != nil {
		return err
	}
	key := Key(l.Key())
	for attempt := 1; ; attempt++ {
		cur, version, err := read(ctx, store, key)
		if err != nil {
			return err
		}
		if l.Token() < cur.Token {
			return &fence.StaleError{Key: key, Token: l.Token(), Highest: cur.Token}
		}
		if cur.Find(tick) != nil {
			return nil
		}
		ticks := append(cur.Ticks, Mark{Tick: tick, Token: l.Token(), Holder: l.Record().Holder, DoneAt: time.Now().UTC()})
		b, err := encode(ticks)
		if err != nil {
			return err
		}
		md := map[string]string{fence.TokenKey: strconv.FormatUint(l.Token(), 10)}
		if version == "" {
			_, err = store.Create(ctx, key, b, md)
		} else {
			_, err = store.Replace(ctx, key, b, md, version)
		}
		if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrConflict) || errors.Is(err, providers.ErrUnknownOutcome) {
			// Written meanwhile (perhaps by this write): read it again.
			if ctx.Err() != nil || attempt == maxAttempts {
				return err
			}
			if !errors.Is(err, providers.ErrPrecondition) {
				// A conflict or an unknown outcome: wait as the lease
				// code does before reading again.
				if ctxsleep.For(ctx, min(30*time.Millisecond<<(attempt-1), time.Second)) != nil {
					return err
				}
			}
			continue
		}
		return err
	}
}

// maxAttempts bounds the writes of one Done: only writers racing for the
// mark, or writes whose outcome stayed unknown, make it write again.
const maxAttempts = 8

// encode is the mark of the newest Remembered of ticks (oldest first),
// with a nonce of its own: no two writes carry the same bytes, so a
// conditional write cannot be fooled where versions are content hashes
// (S3 ETags).
func encode(ticks []Mark) ([]byte, error) {
	if len(ticks) > Remembered {
		ticks = ticks[len(ticks)-Remembered:]
	}
	nonce := make([]byte, 12)
	entropy.Read(nonce)
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(markObject{Version: markVersion, Nonce: hex.EncodeToString(nonce), Ticks: ticks}); err != nil {
			return nil, err
		}
		if buf.Len() <= MaxMarkSize || len(ticks) == 1 {
			return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
		}
		// Ids and holders are bounded so that this cannot happen; if it
		// did, the oldest ticks would go rather than the mark grow past
		// what is read back.
		ticks = ticks[len(ticks)/8+1:]
	}
}

// Once runs job under l unless the mark says tick is done, and then marks
// tick done if job returned nil. ran reports whether job ran; done is the
// mark of tick if it was done before (then job did not run). A job that
// fails leaves the tick open. An id CheckID refuses (ErrBadTick), and a
// lease whose token is below the mark's (ErrBelowMark), are refused
// before job runs.
func Once(ctx context.Context, store providers.Store, l *objlease.Lease, tick string, job func(context.Context) error) (ran bool, done *Mark, err error) {
	if err := CheckID(tick); err != nil {
		return false, nil, err
	}
	marks, err := Read(ctx, store, l.Key())
	if err != nil {
		return false, nil, err
	}
	if m := marks.Find(tick); m != nil {
		return false, m, nil
	}
	if err := marks.Check(l); err != nil {
		return false, nil, err
	}
	if err := job(l.Context()); err != nil {
		return true, nil, err
	}
	return true, nil, Done(ctx, store, l, tick)
}
