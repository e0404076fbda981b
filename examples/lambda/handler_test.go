package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopAll()
	os.Exit(code)
}

// store opens the versitygw bucket as Lambda's role would.
func store(t *testing.T) (providers.Store, string) {
	e := emulator.VersityGW(t)
	t.Setenv("AWS_ACCESS_KEY_ID", e.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	store, _, err := providers.Open(t.Context(), "s3://"+e.Bucket+"/?endpoint="+url.QueryEscape(e.Endpoint)+"&region="+e.Region)
	if err != nil {
		t.Fatal(err)
	}
	return store, emulator.Prefix(t)
}

// invoke calls h as Lambda would, for request req, with event id.
func invoke(t *testing.T, h *Handler, req, id string) (Result, error) {
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: req})
	return h.Handle(ctx, Event{ID: id, Key: "report", Input: id})
}

// The handler against the S3 emulator, as Lambda would call it: of two
// deliveries of one event at once, one does the work and the other
// returns ErrBusy, to be delivered again; that delivery finds the event
// done; the next event works under the next token; a write of the first
// token after that is refused.
func TestHandlerOneInvocationPerKey(t *testing.T) {
	store, prefix := store(t)
	inside := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	works := 0
	h := &Handler{Store: store, Prefix: prefix, TTL: 5 * time.Second, Work: func(ctx context.Context, ev Event) ([]byte, error) {
		works++
		once.Do(func() { close(inside); <-proceed })
		return []byte("done " + ev.Input), nil
	}}

	first := make(chan Result, 1)
	go func() {
		r, err := invoke(t, h, "req-1", "ev-1")
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-inside // req-1 holds the key and is working
	if r, err := invoke(t, h, "req-2", "ev-1"); !errors.Is(err, ErrBusy) || r.Ran {
		t.Errorf("a second delivery while the first works: %+v, %v; want ErrBusy", r, err)
	}
	close(proceed)
	if r := <-first; !r.Ran || r.Token != 1 {
		t.Errorf("first invocation: %+v, want ran with token 1", r)
	}
	if r, err := invoke(t, h, "req-3", "ev-1"); err != nil || r.Ran || r.DoneBy != 1 {
		t.Errorf("the busy delivery, delivered again: %+v, %v; want the event found done by token 1", r, err)
	}
	r, err := invoke(t, h, "req-4", "ev-2")
	if err != nil || !r.Ran || r.Token != 3 {
		t.Fatalf("the next event: %+v, %v; want ran with token 3", r, err)
	}
	if works != 2 {
		t.Errorf("the work ran %d times for two events, want 2", works)
	}
	obj, err := store.Get(t.Context(), prefix+"out/report", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Token  uint64 `json:"token"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(obj.Data, &out); err != nil || out.Token != 3 || out.Output != "done ev-2" {
		t.Errorf("output %s (%v), want ev-2's under token 3", obj.Data, err)
	}
	// The first invocation, had it been frozen before its write and
	// thawed now, is refused by the output itself.
	_, err = fence.Put(t.Context(), store, prefix+"out/report", 1, []byte(`{"token":1,"late":true}`), fence.Options{UniquePayloads: true})
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("a late write of token 1: %v, want fence.ErrStale", err)
	}
	if _, err := invoke(t, h, "req-5", "ev\n3"); err == nil {
		t.Errorf("an event whose id holds a newline was taken")
	}
}

// A duplicate delivered while the first invocation works is not
// acknowledged: if the first then fails, the duplicate's retry does the
// work.
func TestBusyDuplicateIsRetried(t *testing.T) {
	store, prefix := store(t)
	inside := make(chan struct{})
	proceed := make(chan struct{})
	calls := 0
	h := &Handler{Store: store, Prefix: prefix, TTL: 5 * time.Second, Work: func(ctx context.Context, ev Event) ([]byte, error) {
		calls++
		if calls == 1 {
			close(inside)
			<-proceed
			return nil, errors.New("the first invocation failed")
		}
		return []byte("done"), nil
	}}
	first := make(chan error, 1)
	go func() { _, err := invoke(t, h, "req-1", "ev-1"); first <- err }()
	<-inside
	_, dupErr := invoke(t, h, "req-2", "ev-1")
	close(proceed)
	if err := <-first; err == nil {
		t.Fatal("the failing invocation returned no error")
	}
	if dupErr == nil {
		t.Fatalf("the duplicate delivered while the first worked was acknowledged (no error): the event source will not retry it, and the first failed")
	}
	if r, err := invoke(t, h, "req-3", "ev-1"); err != nil || !r.Ran {
		t.Errorf("the duplicate's retry: %+v, %v; want it to do the work", r, err)
	}
	if r, err := invoke(t, h, "req-4", "ev-1"); err != nil || r.Ran || r.DoneBy == 0 {
		t.Errorf("another delivery after that: %+v, %v; want the event found done", r, err)
	}
}
