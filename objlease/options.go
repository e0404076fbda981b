package objlease

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

// Defaults for zero Options fields.
const (
	DefaultTTL        = 30 * time.Second
	DefaultDriftBound = 0.01
)

// Options configure a Client. The zero value is usable: every zero field
// takes its default. New validates the fields together.
type Options struct {
	// TTL is how long a lease lasts after each successful write. Default 30 s.
	TTL time.Duration
	// RenewInterval is how often a held lease is renewed. Default TTL/3. It
	// must leave room for at least two renewals within the holder's safe
	// validity (TTL × (1 − DriftBound)), and respect the store's
	// MinWriteInterval.
	RenewInterval time.Duration
	// PollInterval is how often Acquire retries while the lease is held
	// elsewhere (jittered down by up to 20 %). Default RenewInterval.
	PollInterval time.Duration
	// DriftBound bounds the rate error of every participant's clock: a
	// clock measures an interval of real length d as between d × (1 − b) and
	// d × (1 + b). Clocks need not agree on the time. Default 0.01 (1 %).
	DriftBound float64
	// StoreClock, when set, lets a contender take over a lease whose record
	// the store's own clock says was last written long ago, instead of
	// waiting to see it unchanged for a whole TTL. See StoreClockRule.
	StoreClock *StoreClockRule

	// Holder identifies this client in records. Default host/pid/random.
	Holder string
	// Data is carried in the record while this client holds the lease
	// (for example the leader's address). At most MaxDataSize bytes.
	Data []byte
	// Force allows overwriting an object at the key that is not a valid
	// record (malformed, foreign, or of a newer schema). Without it such an
	// object is reported and left alone.
	Force bool

	// Clock is the time source. Default the real clock.
	Clock clock.Clock
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Rand is the source of jitter and nonces. Default seeded at random; set
	// it to make a simulation reproducible. It is used under a lock.
	Rand *rand.Rand
}

// StoreClockRule is the opt-in fast-takeover rule. It assumes that the
// store's clocks (the ones stamping Last-Modified and answering with Date)
// agree with each other within Margin. Under that assumption a record whose
// age by the store's clock exceeds TTL + the store's timestamp granularity +
// Margin has expired, which lets a fresh process take over a long-dead lease
// at once. The observed-time rule stays in force as the fallback whenever the
// store does not report both times.
type StoreClockRule struct {
	// Margin is the assumed bound on disagreement between the store's
	// clocks. Default 1 s.
	Margin time.Duration
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.DriftBound == 0 {
		o.DriftBound = DefaultDriftBound
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.PollInterval == 0 {
		o.PollInterval = o.RenewInterval
	}
	if o.StoreClock != nil && o.StoreClock.Margin == 0 {
		r := *o.StoreClock
		r.Margin = time.Second
		o.StoreClock = &r
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s/%d/%04x", host, os.Getpid(), rand.Uint32()&0xffff)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return o
}

func (o Options) validate(minWrite time.Duration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	safe := time.Duration(float64(o.TTL) * (1 - o.DriftBound))
	switch {
	case o.TTL < 0 || o.RenewInterval < 0 || o.PollInterval < 0:
		return bad("durations must not be negative (TTL %v, RenewInterval %v, PollInterval %v)", o.TTL, o.RenewInterval, o.PollInterval)
	case o.TTL < time.Millisecond:
		return bad("TTL %v is below the record's 1 ms resolution", o.TTL)
	case o.TTL > MaxTTL:
		return bad("TTL %v is more than %v", o.TTL, MaxTTL)
	case o.DriftBound < 0 || o.DriftBound >= 0.5:
		return bad("DriftBound %v must be in [0, 0.5)", o.DriftBound)
	case 2*o.RenewInterval > safe:
		return bad("RenewInterval %v must be at most half the holder's safe validity TTL × (1 − DriftBound) = %v, so that a failed renewal can be retried", o.RenewInterval, safe)
	case o.RenewInterval < minWrite:
		return bad("RenewInterval %v is below the store's minimum interval between writes to one object (%v)", o.RenewInterval, minWrite)
	case o.StoreClock != nil && o.StoreClock.Margin < 0:
		return bad("StoreClock.Margin %v must not be negative", o.StoreClock.Margin)
	case len(o.Data) > MaxDataSize:
		return bad("Data is %d bytes, more than %d", len(o.Data), MaxDataSize)
	case len(o.Holder) > 256:
		return bad("Holder is %d bytes, more than 256", len(o.Holder))
	}
	return nil
}
