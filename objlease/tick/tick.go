// Package tick runs a scheduled job at most once per tick of its schedule.
//
// Schedulers deliver at least once: Cloud Scheduler and Pub/Sub may deliver
// one trigger twice, and a Kubernetes CronJob may start one schedule twice.
// A lease alone lets the second trigger run the job again as soon as the
// first has released it. A tick is one period of the schedule (or an id the
// scheduler gives); once a holder's job has succeeded for it, a mark says
// so, and any later trigger of the same tick finds the mark and does not
// run the job.
//
// The mark is an object beside the lease (KEY.tick), written as a fenced
// object with the lease's token (package fence): a holder whose lease was
// taken over cannot overwrite the mark of a newer token. A job that fails,
// or whose holder dies before the mark is written, leaves the tick open:
// the next trigger runs it again, under a higher token to fence its writes
// with. So a job runs at least once per tick that is triggered, and, once a
// run of it has succeeded and written the mark, never again for that tick.
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
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
)

// Mark records that the job of a tick succeeded.
type Mark struct {
	Tick   string    `json:"tick"`
	Token  uint64    `json:"token"`   // the token of the lease the job ran under
	Holder string    `json:"holder"`  // who ran it
	DoneAt time.Time `json:"done_at"` // the writer's clock, for people
}

// ErrBadMark: the object where a mark belongs is not one.
var ErrBadMark = errors.New("not an objlease tick mark")

// markVersion marks the object as a tick mark, as "objlease" marks a lease
// record.
const markVersion = 1

// Key is the key of the mark of the lease at leaseKey.
func Key(leaseKey string) string { return leaseKey + ".tick" }

// MaxEarly bounds how long before a period's start a trigger counts for
// that period (see Early).
const MaxEarly = 30 * time.Second

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

// Last returns the mark of the lease at leaseKey; nil if there is none.
func Last(ctx context.Context, store providers.Store, leaseKey string) (*Mark, error) {
	obj, _, err := fence.Get(ctx, store, Key(leaseKey), 4<<10)
	if errors.Is(err, providers.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m struct {
		Version int `json:"objlease_tick"`
		Mark
	}
	dec := json.NewDecoder(bytes.NewReader(obj.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.Version != markVersion || m.Tick == "" {
		return nil, fmt.Errorf("%w at %q: the object there is left alone; remove it to start afresh", ErrBadMark, Key(leaseKey))
	}
	return &m.Mark, nil
}

// Done records that the job of tick succeeded under l. The write is fenced
// with l's token: it is refused (fence.ErrStale) if a newer token has
// written the mark.
func Done(ctx context.Context, store providers.Store, l *objlease.Lease, tick string) error {
	b, err := json.Marshal(struct {
		Version int `json:"objlease_tick"`
		Mark
	}{markVersion, Mark{Tick: tick, Token: l.Token(), Holder: l.Record().Holder, DoneAt: time.Now().UTC()}})
	if err != nil {
		return err
	}
	// Every mark carries its token and the time it was written: no two
	// writes have identical bytes, so in-place fencing is safe on a store
	// whose versions repeat.
	_, err = fence.Put(ctx, store, Key(l.Key()), l.Token(), b, fence.Options{UniquePayloads: true})
	return err
}

// Once runs job under l unless the mark says tick is done, and then marks
// tick done if job returned nil. ran reports whether job ran; prev is the
// mark found before (nil if none). A job that fails leaves the tick open.
func Once(ctx context.Context, store providers.Store, l *objlease.Lease, tick string, job func(context.Context) error) (ran bool, prev *Mark, err error) {
	prev, err = Last(ctx, store, l.Key())
	if err != nil {
		return false, nil, err
	}
	if prev != nil && prev.Tick == tick {
		return false, prev, nil
	}
	if err := job(l.Context()); err != nil {
		return true, prev, err
	}
	return true, prev, Done(ctx, store, l, tick)
}
