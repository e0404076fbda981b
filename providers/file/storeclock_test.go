package file_test

import (
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers/file"
)

// The file store has no clock of its own: LastModified is the writer's
// clock. A writer whose clock was stepped back an hour (NTP, date -s, or
// another machine sharing the directory) must not make its fresh record
// look an hour old to a contender using the store-clock rule.
func TestSteppedWriterClock(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	behind := func() time.Time { return time.Now().Add(-time.Hour) }
	writer, err := file.New(dir, file.WithClock(behind))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	holder, err := newOn(writer, "jobs/nightly", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{TTL: 30 * time.Second, Holder: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := holder.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	a, err := reader.Stat(ctx, "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !a.StoreTime.IsZero() {
		t.Errorf("StoreTime %v: the file store has no clock of its own to report", a.StoreTime)
	}
	if a.LastModified.IsZero() {
		t.Errorf("LastModified not reported")
	}
	contender, err := newOn(reader, "jobs/nightly", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{TTL: 30 * time.Second, Holder: "contender",
		StoreClock: true})
	if err != nil {
		t.Fatal(err)
	}
	var he *objlease.Error
	if l2, err := contender.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) {
		if err == nil {
			l2.Release(ctx)
		}
		t.Fatalf("contender with the store-clock rule against a record written a moment ago: %v, want held", err)
	}
	if want := 30300 * time.Millisecond; he.Wait != want {
		t.Errorf("contender waits %v, want the observed-time rule's %v", he.Wait, want)
	}
}
