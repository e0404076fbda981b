package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// clockedStores are the stores of the storeclock:// scheme, by host: mem
// stores whose clock (their Last-Modified and Date) a test sets.
var (
	clockedMu     sync.Mutex
	clockedStores = map[string]*providers.Bucket{}
	clockedNow    = map[string]time.Time{}
)

// registerClocked registers the storeclock:// scheme, once, in the test
// process only: the command's completion lists the registered schemes.
var registerClocked = sync.OnceFunc(func() {
	_ = providers.Register("storeclock", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		clockedMu.Lock()
		defer clockedMu.Unlock()
		s, ok := clockedStores[u.Host]
		if !ok {
			return nil, "", fmt.Errorf("%w: no store %q", providers.ErrBadURL, u.Host)
		}
		return s, strings.TrimPrefix(u.Path, "/"), nil
	})
})

// clockedStore makes a store whose clock reads start, and returns it with
// a function that sets its clock.
func clockedStore(t *testing.T, start time.Time) (*providers.Bucket, func(time.Time)) {
	t.Helper()
	registerClocked()
	host := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	clockedMu.Lock()
	defer clockedMu.Unlock()
	clockedNow[host] = start
	s := mem.New(mem.WithClock(func() time.Time {
		clockedMu.Lock()
		defer clockedMu.Unlock()
		return clockedNow[host]
	}))
	clockedStores[host] = s
	t.Cleanup(func() {
		clockedMu.Lock()
		defer clockedMu.Unlock()
		delete(clockedStores, host)
		delete(clockedNow, host)
	})
	return s, func(at time.Time) {
		clockedMu.Lock()
		defer clockedMu.Unlock()
		clockedNow[host] = at
	}
}

// runCLI runs the command line in this process and returns its exit code
// and output.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	code := c.main(ctx, args)
	return code, stdout.String(), stderr.String()
}

// TestListGroupWatchAgreeWithInspect: list, group and watch say what a
// record means exactly as inspect does, under either rule (the observed
// rule by default, the store's clock with --store-clock), whatever the
// record's age by the store's clock.
func TestListGroupWatchAgreeWithInspect(t *testing.T) {
	written := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, age := range []time.Duration{5 * time.Second, 12 * time.Second} {
		for _, rule := range []string{"observed", "store-clock"} {
			t.Run(fmt.Sprintf("%v/%s", age, rule), func(t *testing.T) {
				store, setClock := clockedStore(t, written)
				host := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
				for _, key := range []string{"g/members/w1", "g/shards/s1"} {
					rec := objlease.Record{Schema: 1, Name: key, Token: 3, Holder: "w1", Nonce: "n",
						State: objlease.StateHeld, TTLMillis: 10_000, AcquiredAt: written, WrittenAt: written}
					b, err := json.Marshal(rec)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := store.Create(context.Background(), key, b, nil); err != nil {
						t.Fatal(err)
					}
				}
				setClock(written.Add(age))
				var flags []string
				if rule == "store-clock" {
					flags = []string{"--store-clock"}
				}
				base := "storeclock://" + host + "/g/"
				run := func(args ...string) string {
					t.Helper()
					code, out, errOut := runCLI(context.Background(), args...)
					if code != 0 {
						t.Fatalf("objlease %s: exit %d: %s", strings.Join(args, " "), code, errOut)
					}
					return out
				}
				type row struct {
					Kind        string `json:"kind"`
					Name        string `json:"name"`
					Key         string `json:"key"`
					State       string `json:"state"`
					ExpiresInMs int64  `json:"expires_in_ms"`
				}
				var want row
				if err := json.Unmarshal([]byte(run(append(append([]string{"inspect"}, flags...), "-o", "json", base+"shards/s1")...)), &want); err != nil {
					t.Fatal(err)
				}
				agree := func(cmd string, got row) {
					t.Helper()
					if d := got.ExpiresInMs - want.ExpiresInMs; got.State != want.State || d < -500 || d > 500 {
						t.Errorf("%s says %s, expires in %dms; inspect says %s, expires in %dms", cmd, got.State, got.ExpiresInMs, want.State, want.ExpiresInMs)
					}
				}

				listed := 0
				items := func(cmd string) []row {
					t.Helper()
					out := run(append(append([]string{cmd}, flags...), "-o", "json", base)...)
					var doc struct{ Items []row }
					if err := json.Unmarshal([]byte(out), &doc); err != nil {
						t.Fatalf("%s: %v: %q", cmd, err, out)
					}
					return doc.Items
				}
				for _, r := range items("list") {
					if r.Key == "g/shards/s1" {
						listed++
						agree("list", r)
					}
				}
				if listed != 1 {
					t.Errorf("list showed g/shards/s1 %d times", listed)
				}

				grouped := 0
				for _, r := range items("group") {
					if r.Kind == "shard" && r.Name == "s1" {
						grouped++
						agree("group", r)
					}
				}
				if grouped != 1 {
					t.Errorf("group showed shard s1 %d times", grouped)
				}

				// watch prints expired as soon as inspect would say so, and
				// not before.
				ctx, cancel := context.WithTimeoutCause(context.Background(), 1500*time.Millisecond, interrupt{sig: os.Interrupt})
				defer cancel()
				code, out, errOut := runCLI(ctx, append(append([]string{"watch"}, flags...), "-o", "json", base+"shards/s1")...)
				if code != 0 {
					t.Fatalf("watch: exit %d: %s", code, errOut)
				}
				expired := strings.Contains(out, `"event":"expired"`)
				if expired != (want.State == "expired") {
					t.Errorf("watch printed expired: %v; inspect says %s, expires in %dms\n%s", expired, want.State, want.ExpiresInMs, out)
				}
			})
		}
	}
}

// --poll trades reads for takeover time up to one read per TTL, no
// further: the record is due to expire by then.
func TestPollUpToTTL(t *testing.T) {
	for _, tc := range []struct{ poll, want time.Duration }{
		{time.Second, time.Second},
		{4 * time.Second, 4 * time.Second}, // over TTL/3: one read per 4 s
		{time.Minute, 6 * time.Second},
	} {
		lf := leaseFlags{ttl: 6 * time.Second, poll: tc.poll}
		if got := lf.options().PollInterval; got != tc.want {
			t.Errorf("--poll %v at TTL 6s: PollInterval %v, want %v", tc.poll, got, tc.want)
		}
	}
}
