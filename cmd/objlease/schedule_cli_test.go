package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/mem"
)

// countedDriver is a driver that counts its reads.
type countedDriver struct {
	driver.Driver
	reads atomic.Int64
}

func (d *countedDriver) Read(ctx context.Context, key string, maxBytes int64) (*driver.Reader, error) {
	d.reads.Add(1)
	return d.Driver.Read(ctx, key, maxBytes)
}

// countedStores are the stores of the counted:// scheme, by host.
var (
	countedMu     sync.Mutex
	countedStores = map[string]*providers.Bucket{}
)

// registerCounted registers the counted:// scheme, once, in the test
// process only: the command's completion lists the registered schemes.
var registerCounted = sync.OnceFunc(func() {
	_ = providers.Register("counted", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		countedMu.Lock()
		defer countedMu.Unlock()
		b, ok := countedStores[u.Host]
		if !ok {
			return nil, "", fmt.Errorf("%w: no store %q", providers.ErrBadURL, u.Host)
		}
		return b, strings.TrimPrefix(u.Path, "/"), nil
	})
})

// TestWaitingCommandsReadOnTheRenewalPhase: run, hold and acquire wait on
// the holder's renewal phase by default: beside a live holder of a 30 s
// lease (renewals every 10 s) a waiter reads about once per 10 s, not
// every second; --poll D still polls every D.
func TestWaitingCommandsReadOnTheRenewalPhase(t *testing.T) {
	registerCounted()
	ctx := context.Background()
	backing := mem.NewDriver()
	holder, err := objlease.New(providers.NewBucket(backing), "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	for _, tc := range []struct {
		args     []string
		min, max int64
	}{
		{[]string{"acquire"}, 1, 2},
		{[]string{"hold"}, 1, 2},
		{[]string{"run", "URL", "--", "true"}, 1, 2},
		{[]string{"acquire", "--poll", "500ms"}, 5, 100},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			host := fmt.Sprintf("h%d", time.Now().UnixNano())
			d := &countedDriver{Driver: backing}
			countedMu.Lock()
			countedStores[host] = providers.NewBucket(d)
			countedMu.Unlock()
			u := "counted://" + host + "/jobs/nightly"
			args := append([]string{}, tc.args...)
			if args[0] == "run" {
				args[1] = u
			} else {
				args = append(args, u)
			}
			args = append(args[:1], append([]string{"--timeout", "3500ms", "--holder", "bob"}, args[1:]...)...)
			code, _, stderr := runCLI(ctx, args...)
			if code != 75 {
				t.Fatalf("objlease %s: exit %d, want 75: %s", strings.Join(args, " "), code, stderr)
			}
			if n := d.reads.Load(); n < tc.min || n > tc.max {
				t.Errorf("objlease %s read the record %d times in 3.5 s beside a live holder renewing every 10 s; want %d to %d",
					strings.Join(args, " "), n, tc.min, tc.max)
			}
		})
	}
}
