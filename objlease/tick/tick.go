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
// Which tick it is, is judged on the store's clock: the Last-Modified of
// the lease record the holder wrote (Now). Triggers on machines whose
// clocks disagree still agree on the tick; a trigger that fires before the
// period's start by the store's clock counts for the previous period.
package tick

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Of returns the tick of period that holds t: t truncated to a whole number
// of periods since the Unix epoch, in RFC 3339 (UTC). Periods that divide a
// day start at midnight UTC.
func Of(t time.Time, period time.Duration) string {
	return t.UTC().Truncate(period).Format(time.RFC3339)
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
