package electiontest_test

// client-go's own LeaderElector against the lock on the emulators, in real
// time: failover after a leader dies, lost replies, a record changed by
// hand.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/k8s/resourcelock"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/s3store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopAll()
	os.Exit(code)
}

// Election timing: short, so that the tests take seconds; the bounds the
// tests check are loose, for loaded machines.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	waitLong      = 30 * time.Second
)

// target opens a driver on an emulator's bucket.
type target struct {
	name string
	open func(t *testing.T) driver.Driver
}

var targets = []target{
	{"versitygw", func(t *testing.T) driver.Driver {
		e := emulator.VersityGW(t)
		return s3store.NewDriver(s3sdk.New(s3sdk.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, "")}), e.Bucket)
	}},
	{"fake-gcs-server", func(t *testing.T) driver.Driver {
		g := emulator.FakeGCS(t)
		c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint), option.WithoutAuthentication(),
			option.WithHTTPClient(&http.Client{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return gcsstore.NewDriver(c, g.Bucket)
	}},
}

// eachTarget runs test on every emulator, in parallel.
func eachTarget(t *testing.T, test func(t *testing.T, d driver.Driver, key string)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			d := tg.open(t)
			test(t, d, emulator.Prefix(t)+"election")
		})
	}
}

// elector is one candidate running client-go's LeaderElector.
type elector struct {
	id      string
	lock    *resourcelock.Lock
	le      *leaderelection.LeaderElector
	cancel  context.CancelFunc
	started chan uint64   // the token, when it starts leading
	done    chan struct{} // closed when Run returns
	leads   atomic.Bool
}

func startElector(t *testing.T, store providers.Store, key, id string) *elector {
	t.Helper()
	lock, err := resourcelock.New(store, key, id)
	if err != nil {
		t.Fatal(err)
	}
	e := &elector{id: id, lock: lock, started: make(chan uint64, 1), done: make(chan struct{})}
	e.le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          id,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		// A leader that dies writes nothing more.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.leads.Store(true)
				e.started <- lock.Token()
			},
			OnStoppedLeading: func() { e.leads.Store(false) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		e.le.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
	return e
}

// kill ends the elector's Run without a release, as if the process died.
func (e *elector) kill(t *testing.T) {
	t.Helper()
	e.cancel()
	select {
	case <-e.done:
	case <-time.After(waitLong):
		t.Fatalf("%s: Run did not return after its context ended", e.id)
	}
}

// firstLeader waits for one of es to lead and returns it with its token.
func firstLeader(t *testing.T, es ...*elector) (*elector, uint64) {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		for _, e := range es {
			select {
			case tok := <-e.started:
				return e, tok
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no elector started leading")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// record reads the record at key as objlease does.
func record(t *testing.T, store providers.Store, key string) (*objlease.Record, *providers.Object) {
	t.Helper()
	obj, err := store.Get(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := objlease.DecodeRecord(key, obj.Data)
	if err != nil {
		t.Fatalf("%v\n%s", err, obj.Data)
	}
	return rec, obj
}

// Two electors: one leads and renews under one token; killed without a
// release, the other takes over once the lease has run out on its own
// clock, with a higher token.
func TestElectionFailover(t *testing.T) {
	eachTarget(t, func(t *testing.T, d driver.Driver, key string) {
		store := providers.NewBucket(d)
		a, b := startElector(t, store, key, "a"), startElector(t, store, key, "b")
		leader, tok := firstLeader(t, a, b)
		other := map[*elector]*elector{a: b, b: a}[leader]
		if tok == 0 {
			t.Fatal("leader has no token")
		}
		time.Sleep(2 * leaseDuration) // the leader renews; the other waits
		if !leader.le.IsLeader() || other.leads.Load() {
			t.Fatalf("after %v: %s leads %v, %s leads %v", 2*leaseDuration, leader.id, leader.le.IsLeader(), other.id, other.leads.Load())
		}
		rec, _ := record(t, store, key)
		if rec.Holder != leader.id || rec.Token != tok || rec.Renewals < 2 || rec.State != objlease.StateHeld {
			t.Fatalf("record while %s leads with token %d: %+v", leader.id, tok, rec)
		}

		killed := time.Now()
		leader.kill(t)
		var next uint64
		select {
		case next = <-other.started:
		case <-time.After(waitLong):
			t.Fatalf("%s did not take over within %v", other.id, waitLong)
		}
		took := time.Since(killed)
		t.Logf("%s took over %v after %s died; tokens %d then %d", other.id, took.Round(time.Millisecond), leader.id, tok, next)
		// The dead leader's last renewal was at most RenewDeadline before
		// it died, and the other waits LeaseDuration after seeing it.
		if took < leaseDuration-renewDeadline {
			t.Errorf("takeover %v after the leader died: sooner than its lease could have run out", took)
		}
		if limit := leaseDuration + retryPeriod + 10*time.Second; took > limit {
			t.Errorf("takeover %v after the leader died, more than %v", took, limit)
		}
		if next <= tok || other.lock.Token() != next {
			t.Errorf("new leader's token %d (lock says %d), want above %d", next, other.lock.Token(), tok)
		}
		rec, _ = record(t, store, key)
		if rec.Holder != other.id || rec.Token != next {
			t.Errorf("record after takeover: %+v", rec)
		}
	})
}

// Every write of the leader lands and its reply is lost: the lock
// recognises its own writes, so the leader keeps leading under one token
// and the other candidate never takes over.
func TestElectionLostReplies(t *testing.T) {
	eachTarget(t, func(t *testing.T, d driver.Driver, key string) {
		f, err := faulty.New(d, faulty.Config{Seed: 1, Ops: map[faulty.Op]faulty.Rates{
			faulty.Create: {LostReply: 1}, faulty.Replace: {LostReply: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		store := providers.NewBucket(d)
		a := startElector(t, providers.NewBucket(f), key, "a")
		leader, tok := firstLeader(t, a)
		b := startElector(t, store, key, "b")
		time.Sleep(3 * leaseDuration)
		if !leader.le.IsLeader() || b.leads.Load() {
			t.Fatalf("after %v of lost replies: a leads %v, b leads %v", 3*leaseDuration, leader.le.IsLeader(), b.leads.Load())
		}
		select {
		case <-a.done:
			t.Fatal("a stopped leading")
		default:
		}
		rec, _ := record(t, store, key)
		lost := f.Counts()[faulty.KindLostReply]
		t.Logf("%d replies lost; record token %d, %d renewals", lost, rec.Token, rec.Renewals)
		if rec.Holder != "a" || rec.Token != tok || rec.Renewals < 3 || a.lock.Token() != tok {
			t.Fatalf("record after lost replies: %+v; a's token %d, want %d", rec, a.lock.Token(), tok)
		}
		if lost < int64(rec.Renewals)+1 {
			t.Fatalf("%d replies lost for %d renewals", lost, rec.Renewals)
		}
		a.kill(t)
		select {
		case next := <-b.started:
			if next != tok+1 {
				t.Fatalf("b's token %d, want %d", next, tok+1)
			}
		case <-time.After(waitLong):
			t.Fatal("b did not take over")
		}
	})
}

// A record changed by hand while a leads: a's renewals fail and it stops
// leading; neither candidate overwrites the object, and the lock's error
// names the key.
func TestElectionRecordChangedByHand(t *testing.T) {
	eachTarget(t, func(t *testing.T, d driver.Driver, key string) {
		store := providers.NewBucket(d)
		a := startElector(t, store, key, "a")
		firstLeader(t, a)
		b := startElector(t, store, key, "b")
		ctx := context.Background()
		_, obj := record(t, store, key)
		foreign := []byte(`{"holderIdentity":"someone-else","leaseDurationSeconds":3600}`)
		res, err := store.Replace(ctx, key, foreign, nil, obj.Version)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.done:
		case <-time.After(renewDeadline + retryPeriod + waitLong):
			t.Fatal("a kept leading over a record changed by hand")
		}
		time.Sleep(2 * leaseDuration)
		if b.leads.Load() {
			t.Fatal("b leads over a record changed by hand")
		}
		got, err := store.Get(ctx, key, 0)
		if err != nil || got.Version != res.Version || string(got.Data) != string(foreign) {
			t.Fatalf("the object was overwritten: %v %s", err, got.Data)
		}
		_, _, err = b.lock.Get(ctx)
		if !errors.Is(err, resourcelock.ErrBadRecord) || !strings.Contains(err.Error(), key) {
			t.Fatalf("Get: %v; want ErrBadRecord naming %q", err, key)
		}
		t.Logf("Get: %v", err)
	})
}
