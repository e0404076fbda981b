package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/providertest"
)

// unorderedInner is what the "unordered" scheme lists, out of key order;
// the scheme is registered once, however often the test runs.
var (
	unorderedInner    atomic.Pointer[providers.Bucket]
	registerUnordered = sync.OnceValue(func() error {
		return providers.Register("unordered", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
			return providertest.Unordered(unorderedInner.Load()), strings.TrimPrefix(u.Path, "/"), nil
		})
	})
)

// TestListSortedOnAnUnorderedStore: S3 Express One Zone lists keys out of
// lexical order; list prints them sorted all the same, in both formats. The
// scheme is registered here, not in an init, so that the objlease the
// scripts run does not know it.
func TestListSortedOnAnUnorderedStore(t *testing.T) {
	inner := mem.New()
	keys := []string{"jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e"}
	for _, k := range keys {
		c, err := objlease.New(inner, k, objlease.Options{Holder: "h-" + k, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	unorderedInner.Store(inner)
	if err := registerUnordered(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := c.main(context.Background(), args); code != 0 {
			t.Fatalf("%v exited %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}

	var got []string
	for _, m := range regexp.MustCompile(`(?m)^(jobs/\S+)`).FindAllStringSubmatch(run("list", "unordered://s/jobs/"), -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, " ") != strings.Join(keys, " ") {
		t.Errorf("list printed %v, want %v", got, keys)
	}

	got = nil
	var doc struct{ Items []listItem }
	if err := json.Unmarshal([]byte(run("list", "-o", "json", "unordered://s/jobs/")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, row := range doc.Items {
		got = append(got, row.Key)
	}
	if strings.Join(got, " ") != strings.Join(keys, " ") {
		t.Errorf("list -o json printed %v, want %v", got, keys)
	}
}

// TestWatchPrefixInKeyOrderOnAnUnorderedStore: watching a prefix of a store
// that lists out of key order prints one poll's changes in key order.
func TestWatchPrefixInKeyOrderOnAnUnorderedStore(t *testing.T) {
	inner := mem.New()
	keys := []string{"jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e"}
	wl := startWatch(t, providertest.Unordered(inner), "jobs/", time.Second)
	wl.waitIdle()
	for _, k := range keys {
		newHolder(t, inner, k, "h").acquire(t)
	}
	var got []string
	for _, ev := range wl.next() {
		got = append(got, ev.Key)
	}
	if strings.Join(got, " ") != strings.Join(keys, " ") {
		t.Errorf("watch printed changes of %v, want %v", got, keys)
	}
}
