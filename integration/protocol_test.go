package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/gcsstore"
)

// The lease protocol's own tests and the stale-writer scenarios, on every
// cloud store's emulator (or real bucket), through the real SDKs.

func TestS3Protocol(t *testing.T) {
	target := newS3Target(t)
	st := target.store(t, nil)
	target.cleanup(t, st)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
}

func TestGCSProtocol(t *testing.T) {
	g := newGCSTarget(t)
	st := gcsstore.New(g.client(t, nil), g.bucket)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: g.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: g.prefix + "fence/"})
}

func TestAzblobProtocol(t *testing.T) {
	a := newAzTarget(t)
	st := a.store(t, nil)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: a.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: a.prefix + "fence/"})
}

// replyDropper lets the next request with a chosen method reach the store,
// reads the store's real reply, and then fails as a reset connection would.
type replyDropper struct {
	mu      sync.Mutex
	method  string
	dropped int
}

func (d *replyDropper) arm(method string) { d.mu.Lock(); d.method = method; d.mu.Unlock() }

func (d *replyDropper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil || req.Method != d.method {
		return resp, err
	}
	d.method = ""
	d.dropped++
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset by peer (reply dropped by the test)")
}

// lostRepliesAtLeaseLevel acquires, renews and releases a lease while the
// reply to each write is lost after the store applied it: every step must
// still be reported as the success it was.
func lostRepliesAtLeaseLevel(t *testing.T, st providers.Store, d *replyDropper, writeMethod, key string) {
	ctx := context.Background()
	c, err := newOn(st, key, objlease.SessionOptions{Clock: clock.NewFake(time.Now())}, objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.arm(writeMethod)
	l, err := c.TryAcquire(ctx)
	if err != nil || l.Token() != 1 {
		t.Fatalf("acquire whose reply was lost: %v", err)
	}
	d.arm(writeMethod)
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renew whose reply was lost: %v", err)
	}
	d.arm(writeMethod)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release whose reply was lost: %v", err)
	}
	st2, err := c.Inspect(ctx)
	if err != nil || st2.Record.State != objlease.StateReleased || st2.Record.Renewals != 1 || st2.Record.Token != 1 {
		t.Fatalf("record after lost replies: %+v %v", st2.Record, err)
	}
	if d.dropped != 3 {
		t.Fatalf("%d replies dropped, want 3", d.dropped)
	}
}

func TestS3LostReplyLease(t *testing.T) {
	target := newS3Target(t)
	d := &replyDropper{}
	st := target.store(t, d)
	target.cleanup(t, st)
	lostRepliesAtLeaseLevel(t, st, d, http.MethodPut, target.prefix+"lease")
}

func TestGCSLostReplyLease(t *testing.T) {
	g := newGCSTarget(t)
	d := &replyDropper{}
	lostRepliesAtLeaseLevel(t, gcsstore.New(g.client(t, d), g.bucket), d, http.MethodPost, g.prefix+"lease")
}

func TestAzblobLostReplyLease(t *testing.T) {
	a := newAzTarget(t)
	d := &replyDropper{}
	lostRepliesAtLeaseLevel(t, a.store(t, d), d, http.MethodPut, a.prefix+"lease")
}
