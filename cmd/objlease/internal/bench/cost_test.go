package bench

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers/mem"
)

// goSource is a clock.Source on Go's own time, which a synctest bubble
// fakes: the leases' clock then advances with the bubble's.
type goSource struct{ start time.Time }

func (s goSource) Mono() time.Duration { return time.Since(s.start) }
func (s goSource) Boot() time.Duration { return time.Since(s.start) }
func (s goSource) Wall() time.Time     { return time.Now() }
func (s goSource) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// The store-clock waiter beside a live holder reads once per TTL at most
// (about once per 1.01 TTL while its phase settles, then exactly once per
// TTL, g + m after a renewal): over whole TTLs of its wait the bench
// counts one read per TTL. A window that starts with the wait, cut at 10
// TTLs, leaves out the read that falls just after it, and reports 0.9.
func TestWaitingCountsWholeTTLs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		b := &bench{
			cs:      &countingStore{Store: mem.New()},
			log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
			scratch: "bench/",
			ttl:     6 * time.Second, renew: 2 * time.Second, poll: 2 * time.Second, drift: 0.01,
			clk: clock.FromSource(goSource{now}, now),
		}
		rows, err := b.waiting(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[1].Rule != ruleStoreClock {
			t.Fatalf("rows %+v, want the observed rule, then the store clock", rows)
		}
		for _, r := range rows {
			if r.Seconds != waitTTLs*6 || r.TTLs != waitTTLs || r.FromSeconds != 6 || r.HolderLost {
				t.Errorf("%s: counted over %gs (%g TTLs) from %gs, want %ds (%d whole TTLs) from one TTL in: %+v",
					r.Rule, r.Seconds, r.TTLs, r.FromSeconds, waitTTLs*6, waitTTLs, r)
			}
		}
		if r := rows[1]; r.Requests != waitTTLs || r.PerTTL != 1 || r.PerHour != 600 || !r.GoalMet {
			t.Errorf("store-clock waiter: %d requests, %.2f per TTL, %.0f an hour; want %d, 1.00, 600: %+v",
				r.Requests, r.PerTTL, r.PerHour, waitTTLs, r)
		}
		// The observed rule reads once per renewal interval once it has
		// learned the holder's phase: 3 per TTL, a little more while it
		// learns.
		if r := rows[0]; r.PerTTL < 3 || r.PerTTL >= 4 {
			t.Errorf("observed-rule waiter: %.2f requests per TTL, want 3 to 4: %+v", r.PerTTL, r)
		}
	})
}
