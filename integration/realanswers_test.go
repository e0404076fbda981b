package integration

// The drivers against the real clouds' answers where the emulators answer
// otherwise: the emulator behind a cloudProxy. On a real bucket
// (OBJLEASE_TEST_S3, OBJLEASE_TEST_GCS) the cloud answers for itself, and
// these tests skip.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/googleapi"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// s3Proxied returns a proxy before the target's emulator and a store on
// bucket that talks to it.
func s3Proxied(t *testing.T, target s3Target, bucket string) (*cloudProxy, *providers.Bucket) {
	t.Helper()
	if target.real() {
		t.Skip("a real bucket gives the real answers itself")
	}
	p := newCloudProxy(t, "s3", target.emu.Endpoint, bucket)
	return p, s3store.New(target.client(t, func(o *s3sdk.Options) { o.BaseEndpoint = &p.URL }), bucket)
}

// The conformance suite, with racing writers refused 409 as AWS refuses
// them and listings out of key order as S3 Express lists.
func TestS3RealAnswersConformance(t *testing.T) {
	target := newS3Target(t)
	p, st := s3Proxied(t, target, target.bucket)
	_, missing := s3Proxied(t, target, randomName())
	target.cleanup(t, st)
	providertest.Run(t, providertest.Config{Bucket: st, Prefix: target.prefix, MissingBucket: missing, Unordered: true})
	if p.count("list reversed") == 0 {
		t.Error("no listing went through the proxy")
	}
	t.Logf("proxy answered 409 ConditionalRequestConflict %d times, 404 NoSuchKey %d times", p.count("409 ConditionalRequestConflict"), p.count("404 NoSuchKey"))
}

// The lease protocol's tests and the stale-writer scenarios.
func TestS3RealAnswersProtocol(t *testing.T) {
	target := newS3Target(t)
	p, st := s3Proxied(t, target, target.bucket)
	target.cleanup(t, st)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
	t.Logf("proxy answered 409 ConditionalRequestConflict %d times, 404 NoSuchKey %d times", p.count("409 ConditionalRequestConflict"), p.count("404 NoSuchKey"))
}

// Racing conditional writes: one wins, the others are refused 409
// ConditionalRequestConflict (ErrConflict) or 412 (ErrPrecondition); a
// write racing a delete likewise.
func TestS3RealAnswersRacingWrites(t *testing.T) {
	target := newS3Target(t)
	p, st := s3Proxied(t, target, target.bucket)
	p.hold = 50 * time.Millisecond // the racers overlap even on a slow machine
	target.cleanup(t, st)
	ctx := t.Context()
	key := target.prefix + "race"
	errs := make([]error, 8)
	start := make(chan struct{})
	done := make(chan int)
	for i := range errs {
		go func() {
			<-start
			_, errs[i] = st.Create(ctx, key, fmt.Appendf(nil, "racer %d", i), nil)
			done <- i
		}()
	}
	close(start)
	for range errs {
		<-done
	}
	wins, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, providers.ErrConflict):
			conflicts++
			wantS3Err(t, err, "create", key, providers.ErrConflict)
		case !errors.Is(err, providers.ErrPrecondition):
			t.Errorf("create %q: %v, want success, ErrConflict or ErrPrecondition", key, err)
		}
	}
	if wins != 1 || conflicts == 0 {
		t.Fatalf("%d winners and %d ErrConflict among %d racing creates; want 1 winner and some 409s", wins, conflicts, len(errs))
	}

	// A replace racing a delete of the same version.
	a, err := st.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var rerr, derr error
	go func() { _, rerr = st.Replace(ctx, key, []byte("replaced"), nil, a.Version); done <- 0 }()
	go func() { derr = st.Delete(ctx, key, a.Version); done <- 1 }()
	<-done
	<-done
	if (rerr == nil) == (derr == nil) {
		t.Fatalf("replace and delete of one version: %v, %v; want exactly one to succeed", rerr, derr)
	}
	for _, err := range []error{rerr, derr} {
		if err != nil && !errors.Is(err, providers.ErrConflict) && !errors.Is(err, providers.ErrPrecondition) {
			t.Errorf("the loser of a replace racing a delete: %v, want ErrConflict or ErrPrecondition", err)
		}
	}
	t.Logf("proxy answered 409 %d times", p.count("409 ConditionalRequestConflict"))
}

// A key deleted between Delete's HEAD and its conditional DELETE: AWS
// answers 404 NoSuchKey (versitygw 204), which Delete reports as
// ErrPrecondition, not as its own success.
func TestS3RealAnswersDeleteOfVanishedKey(t *testing.T) {
	target := newS3Target(t)
	p, st := s3Proxied(t, target, target.bucket)
	// Another client, through the same proxy.
	other := s3store.New(target.client(t, func(o *s3sdk.Options) { o.BaseEndpoint = &p.URL }), target.bucket)
	ctx := t.Context()
	key := target.prefix + "vanishing"
	v := mustCreateS3(t, st, key, []byte("x"))
	p.mu.Lock()
	p.before = func(*http.Request) {
		if err := other.Delete(context.Background(), key, v); err != nil {
			t.Errorf("the racing delete: %v", err)
		}
	}
	p.mu.Unlock()
	status, code := wantS3Err(t, st.Delete(ctx, key, v), "delete", key, providers.ErrPrecondition)
	if status != 404 || code != "NoSuchKey" {
		t.Errorf("delete of a vanished key: store answered %d %s, want 404 NoSuchKey", status, code)
	}
	if n := p.count("404 NoSuchKey"); n != 1 {
		t.Errorf("proxy answered 404 NoSuchKey %d times, want 1", n)
	}
}

// Listings out of key order (S3 Express One Zone): every key still listed
// once, and a shard group's description comes back in key order.
func TestS3RealAnswersUnorderedListing(t *testing.T) {
	target := newS3Target(t)
	_, st := s3Proxied(t, target, target.bucket)
	target.cleanup(t, st)
	ctx := t.Context()
	prefix := target.prefix + "group"
	ids := []string{"s1", "s2", "s3", "s4"}
	if err := shard.Define(ctx, st, prefix, objlease.Options{}, ids...); err != nil {
		t.Fatal(err)
	}
	page, err := st.List(ctx, shard.ShardsPrefix(prefix), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, a := range page.Objects {
		listed = append(listed, a.Key)
	}
	if slices.IsSorted(listed) || len(listed) != len(ids) {
		t.Fatalf("listed %q: want all %d shards, out of key order", listed, len(ids))
	}
	v, err := shard.Describe(ctx, st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range v.Shards {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, ids) {
		t.Errorf("Describe: shards %v, want %v in key order", names, ids)
	}
}

// gcsProxied returns a proxy before the target's fake-gcs-server and a
// store that talks to it.
func gcsProxied(t *testing.T, g gcsTarget) (*cloudProxy, *providers.Bucket) {
	t.Helper()
	if g.real() {
		t.Skip("a real bucket gives the real answers itself")
	}
	p := newCloudProxy(t, "gcs", "http://"+g.host, g.bucket)
	pg := g
	pg.endpoint = p.URL + "/storage/v1/"
	return p, gcsstore.New(pg.client(t, nil), g.bucket)
}

// GCS answers more than one write a second to an object with 429 or, at
// times, 410 Gone: both are ErrThrottled, and nothing was written.
func TestGCSRealAnswersThrottling(t *testing.T) {
	g := newGCSTarget(t)
	p, st := gcsProxied(t, g)
	// Wider than GCS's second, so that a slow machine does not let a
	// write through.
	p.minInterval = 3 * time.Second
	ctx := t.Context()
	key := g.prefix + "busy"
	res := mustCreate(t, st, key, []byte("v1"))
	statuses := map[int]bool{}
	for _, data := range []string{"v2", "v3"} {
		_, err := st.Replace(ctx, key, []byte(data), nil, res.Version)
		wantGCSErr(t, err, "replace", key, providers.ErrThrottled)
		var ge *googleapi.Error
		if errors.As(err, &ge) {
			statuses[ge.Code] = true
		}
	}
	if !statuses[429] || !statuses[410] {
		t.Errorf("throttled writes answered %v; want 429 and 410", statuses)
	}
	wantGCSErr(t, st.Delete(ctx, key, res.Version), "delete", key, providers.ErrThrottled)
	o, err := st.Get(ctx, key, 0)
	if err != nil || string(o.Data) != "v1" || o.Version != res.Version {
		t.Fatalf("after throttled writes: %v, %v; want v1 at version %s unchanged", o, err, res.Version)
	}
	time.Sleep(p.minInterval + 100*time.Millisecond)
	if _, err := st.Replace(ctx, key, []byte("v4"), nil, res.Version); err != nil {
		t.Fatalf("a write after the interval: %v", err)
	}
	t.Logf("proxy answered 429 %d times, 410 %d times", p.count("429 rateLimitExceeded"), p.count("410 Gone"))
}
