package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A store whose Date is cached and refreshed once a second (as versitygw's
// HTTP server does) runs its Date behind its Last-Modified by the refresh's
// phase; one that stamps its Date per answer does not.
func TestClockEstimateFindsDateLag(t *testing.T) {
	base := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		offset time.Duration // store − client
		phase  time.Duration // the cached Date's refresh phase; 0: none
		lmGran time.Duration // declared
		stamp  time.Duration // Last-Modified as written
		want   time.Duration
	}{
		{"per-answer Date", 300 * time.Millisecond, 0, time.Second, time.Second, 0},
		{"per-answer Date, ms stamps", -2 * time.Second, 0, time.Millisecond, time.Millisecond, 0},
		{"per-answer Date, finer stamps than declared", 2 * time.Second, 0, time.Second, time.Millisecond, 0},
		{"Date refreshed once a second", 0, 850 * time.Millisecond, time.Second, time.Second, 850 * time.Millisecond},
		{"Date refreshed once a second, offset", 1700 * time.Millisecond, 400 * time.Millisecond, time.Second, time.Second, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			date := func(storeNow time.Time) time.Time {
				if tc.phase == 0 {
					return storeNow.Truncate(time.Second)
				}
				// The latest refresh at or before storeNow, at phase
				// into its second.
				refresh := storeNow.Add(-tc.phase).Truncate(time.Second).Add(tc.phase)
				return refresh.Truncate(time.Second)
			}
			e := clockEstimate{lmGran: tc.lmGran}
			now := base
			for range 3 * minClockSamples {
				sent := e.next(now.Add(time.Duration(r.Int64N(int64(10 * time.Millisecond)))))
				rtt := time.Duration(2+r.IntN(6)) * time.Millisecond
				at := sent.Add(rtt / 2).Add(tc.offset) // the store's moment
				got := sent.Add(rtt)
				e.add(clockSample{sent: sent, got: got, lastModified: at.Truncate(tc.stamp), date: date(at)})
				now = got
			}
			lag := e.lag()
			if !lag.Known {
				t.Fatal("lag unknown")
			}
			lo, hi := fromMs(lag.LoMs), fromMs(lag.HiMs)
			if lo > tc.want || hi < tc.want || hi-lo > 20*time.Millisecond {
				t.Errorf("lag in [%v, %v]; want a window of at most 20ms around %v", lo, hi, tc.want)
			}
		})
	}
}

// Too few stamps, or none from a store that reports no time, leave the lag
// unknown rather than guessed.
func TestClockEstimateUnknown(t *testing.T) {
	base := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	e := clockEstimate{lmGran: time.Second}
	for i := range minClockSamples {
		sent := base.Add(time.Duration(i) * 700 * time.Millisecond)
		e.add(clockSample{sent: sent, got: sent.Add(time.Millisecond), lastModified: sent.Truncate(time.Second)})
	}
	if lag := e.lag(); lag.Known {
		t.Errorf("lag known without a Date: %+v", lag)
	}
	e = clockEstimate{lmGran: time.Second}
	e.add(clockSample{sent: base, got: base.Add(time.Millisecond), lastModified: base, date: base})
	if lag := e.lag(); lag.Known {
		t.Errorf("lag known from one sample: %+v", lag)
	}
}
