package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/wirecount"
)

// Store operations, as countingStore counts their requests.
const (
	opGet = iota
	opStat
	opList
	opCreate
	opReplace
	opDelete
	numOps
)

// counts is a number of requests per store operation.
type counts [numOps]int64

func (c counts) sub(d counts) counts {
	for i := range c {
		c[i] -= d[i]
	}
	return c
}

func (c counts) reads() int64  { return c[opGet] + c[opStat] + c[opList] }
func (c counts) writes() int64 { return c[opCreate] + c[opReplace] + c[opDelete] }
func (c counts) total() int64  { return c.reads() + c.writes() }

// opNames are the labels wire requests are counted under, by operation.
var opNames = [numOps]string{"get", "stat", "list", "create", "replace", "delete"}

// countingStore counts the requests of every call made through it: the
// bench reports round trips, not only times. On a store with a wire (S3,
// GCS, Azure) it counts the HTTP requests each call sent, retries and
// extra lookups included; on one without (file, mem), the calls.
type countingStore struct {
	providers.Store
	wire *wirecount.Transport // nil: no wire, count calls
	n    [numOps]atomic.Int64
	// wrote, if set, is told when each write that succeeded was sent.
	wrote func(sent time.Time)
}

// openCounted opens rawURL with open, with wirecount under the SDK client
// where the store has one, and returns the store counted.
func openCounted(ctx context.Context, open func(context.Context, string, providers.OpenOptions) (providers.Store, string, error), rawURL string) (*countingStore, string, error) {
	var wire *wirecount.Transport
	store, prefix, err := open(ctx, rawURL, providers.OpenOptions{Transport: func(base http.RoundTripper) http.RoundTripper {
		wire = wirecount.New(base)
		return wire
	}})
	if err != nil {
		return nil, "", err
	}
	return &countingStore{Store: store, wire: wire}, prefix, nil
}

func (s *countingStore) counts() counts {
	var c counts
	if s.wire != nil {
		byOp := s.wire.Labeled()
		for i := range c {
			c[i] = int64(byOp[opNames[i]])
		}
		return c
	}
	for i := range c {
		c[i] = s.n[i].Load()
	}
	return c
}

// call counts a call of op and labels its requests.
func (s *countingStore) call(ctx context.Context, op int) context.Context {
	s.n[op].Add(1)
	if s.wire == nil {
		return ctx
	}
	return wirecount.WithLabel(ctx, opNames[op])
}

func (s *countingStore) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	return s.Store.Get(s.call(ctx, opGet), key, maxBytes)
}

func (s *countingStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	return s.Store.Stat(s.call(ctx, opStat), key)
}

func (s *countingStore) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	return s.Store.List(s.call(ctx, opList), prefix, pageToken, pageSize)
}

func (s *countingStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	sent := time.Now()
	r, err := s.Store.Create(s.call(ctx, opCreate), key, data, md)
	s.written(sent, err)
	return r, err
}

func (s *countingStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	sent := time.Now()
	r, err := s.Store.Replace(s.call(ctx, opReplace), key, data, md, ifVersion)
	s.written(sent, err)
	return r, err
}

func (s *countingStore) written(sent time.Time, err error) {
	if err == nil && s.wrote != nil {
		s.wrote(sent)
	}
}

func (s *countingStore) Delete(ctx context.Context, key, ifVersion string) error {
	return s.Store.Delete(s.call(ctx, opDelete), key, ifVersion)
}

// pacer keeps writes to any one key at least min apart, so that the bench
// stays within a store's sustained write rate per object (GCS: about one
// per second) instead of measuring its throttling.
type pacer struct {
	min  time.Duration
	last map[string]time.Time
}

func newPacer(min time.Duration) *pacer { return &pacer{min: min, last: map[string]time.Time{}} }

// wait blocks until key may be written again, and notes the write.
func (p *pacer) wait(ctx context.Context, key string) error {
	if p.min <= 0 {
		return nil
	}
	if d := time.Until(p.last[key].Add(p.min)); d > 0 {
		if err := ctxsleep.For(ctx, d); err != nil {
			return err
		}
	}
	p.last[key] = time.Now()
	return nil
}

// dist summarises a sample of durations.
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func summarise(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return dist{N: len(s), P50: ms(quantile(s, 0.5)), P90: ms(quantile(s, 0.9)), P99: ms(quantile(s, 0.99)), Max: ms(s[len(s)-1])}
}

// quantile is the nearest-rank q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fromMs turns milliseconds back into a duration, for printing.
func fromMs(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// progress shows what the bench is doing on stderr: one line rewritten in
// place on a terminal, otherwise a plain line every few seconds, so that a
// log file is not flooded.
type progress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	mu    sync.Mutex
	last  time.Time
	shown bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, now: time.Now}
	// A character device is a terminal in practice (or /dev/null, where
	// nothing is lost either way); the standard library has no isatty.
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// show reports msg: at once if force (a new phase), else if enough time
// has passed since the last report.
func (p *progress) show(force bool, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	now := p.now()
	if !force && now.Sub(p.last) < every {
		return
	}
	p.last = now
	msg := fmt.Sprintf(format, args...)
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", msg)
		p.shown = true
		return
	}
	fmt.Fprintf(p.w, "objlease bench: %s\n", msg)
}

// clear removes the progress line from a terminal.
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
