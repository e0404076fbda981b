package integration

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/azurestore"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/probe"
	"github.com/objlease/objlease/providers/s3store"
)

// Faults against real emulators, in real time: while a holder renews, the
// emulator is stopped and restarted, or frozen, or slowed down. The holder
// must signal loss before its lease could be taken over, a contender must
// take over once the store is back, and the record must stay readable.

const faultTTL = 3 * time.Second

// slowTransport delays every request, as a distant or overloaded store would.
type slowTransport struct{ delay time.Duration }

func (s slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(req)
}

type faultTarget struct {
	proc *emulator.Process
	// open returns a new store on the emulator whose requests go through rt.
	open func(t *testing.T, rt http.RoundTripper) providers.Store
}

func versityTarget(t *testing.T) faultTarget {
	e, p := emulator.StartVersityGW(t)
	return faultTarget{p, func(t *testing.T, rt http.RoundTripper) providers.Store {
		return s3store.New(s3sdk.New(s3sdk.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, ""),
			HTTPClient:  &http.Client{Transport: rt}}), e.Bucket)
	}}
}

func fakeGCSTarget(t *testing.T) faultTarget {
	g, p := emulator.StartFakeGCS(t)
	return faultTarget{p, func(t *testing.T, rt http.RoundTripper) providers.Store {
		c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint), option.WithoutAuthentication(),
			option.WithHTTPClient(&http.Client{Transport: rt}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return gcsstore.New(c, g.Bucket)
	}}
}

func azuriteTarget(t *testing.T) faultTarget {
	a, p := emulator.StartAzurite(t)
	return faultTarget{p, func(t *testing.T, rt http.RoundTripper) providers.Store {
		c, err := container.NewClientFromConnectionString(a.ConnectionString, a.Container,
			&container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: rt}}})
		if err != nil {
			t.Fatal(err)
		}
		return azurestore.New(c)
	}}
}

func TestFaultsS3(t *testing.T)     { runFaults(t, versityTarget) }
func TestFaultsGCS(t *testing.T)    { runFaults(t, fakeGCSTarget) }
func TestFaultsAzblob(t *testing.T) { runFaults(t, azuriteTarget) }

func runFaults(t *testing.T, start func(t *testing.T) faultTarget) {
	for _, fault := range []string{"stop-restart", "freeze", "slow"} {
		t.Run(fault, func(t *testing.T) {
			target := start(t)
			faultScenario(t, target, fault)
		})
	}
}

func faultScenario(t *testing.T, target faultTarget, fault string) {
	ctx := context.Background()
	key := "faults/" + fault
	var holderRT http.RoundTripper = http.DefaultTransport
	if fault == "slow" {
		// A quarter of the TTL per request: slow, but a healthy holder
		// must keep its lease.
		holderRT = slowTransport{faultTTL / 4}
	}
	opts := func(holder string) objlease.Options {
		return objlease.Options{TTL: faultTTL, RenewInterval: time.Second, PollInterval: 200 * time.Millisecond, Holder: holder}
	}
	// Warm the emulator up first (Azurite's first writes take seconds): the
	// scenario is about the fault, not about a cold start.
	if _, err := probe.Run(ctx, target.open(t, http.DefaultTransport), "warm-up/"); err != nil {
		t.Fatal(err)
	}
	holder, err := objlease.New(target.open(t, holderRT), key, opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := holder.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	contender, err := objlease.New(target.open(t, http.DefaultTransport), key, opts("contender"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contender.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("contender while held: %v", err)
	}

	if fault == "slow" {
		// Several renewal rounds through the slow path: no loss.
		time.Sleep(3 * faultTTL)
		if err := l.Err(); err != nil {
			t.Fatalf("a slow but healthy holder lost its lease: %v", err)
		}
		if _, err := contender.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("contender took over from a slow but healthy holder: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}

	time.Sleep(1500 * time.Millisecond) // a renewal or two
	switch fault {
	case "stop-restart":
		target.proc.Stop()
	case "freeze":
		target.proc.Pause()
	}
	var lostAt time.Time
	select {
	case <-l.Done():
		lostAt = time.Now()
	case <-time.After(10 * faultTTL):
		t.Fatal("the holder never noticed the store was gone")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, objlease.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
	switch fault {
	case "stop-restart":
		target.proc.Restart(t)
	case "freeze":
		target.proc.Resume()
	}

	actx, cancel := context.WithTimeout(ctx, 10*faultTTL)
	defer cancel()
	l2, err := contender.Acquire(actx)
	if err != nil {
		t.Fatalf("contender after the store came back: %v\n%s", err, target.proc.Log())
	}
	takenAt := time.Now()
	if !lostAt.Before(takenAt) {
		t.Fatalf("holder lost its lease at %v, not before the contender took over at %v", lostAt, takenAt)
	}
	if l2.Token() != l.Token()+1 {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	// The old holder's release must not touch the new holder's record.
	if err := l.Release(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("old holder's release: %v, want ErrLeaseLost", err)
	}
	st, err := contender.Inspect(ctx)
	if err != nil || st.Record.Holder != "contender" || st.Record.State != objlease.StateHeld {
		t.Fatalf("record after the fault: %+v %v", st, err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: holder lost its lease %v before the contender took over", fault, takenAt.Sub(lostAt).Round(time.Millisecond))
}
