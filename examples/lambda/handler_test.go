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

// The handler against the S3 emulator, as Lambda would call it: of two
// invocations for one key at once, one does the work and the other
// returns at once; the next one works under the next token; a write of
// the first token after that is refused.
func TestHandlerOneInvocationPerKey(t *testing.T) {
	e := emulator.VersityGW(t)
	t.Setenv("AWS_ACCESS_KEY_ID", e.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	prefix := emulator.Prefix(t)
	store, _, err := providers.Open(t.Context(), "s3://"+e.Bucket+"/?endpoint="+url.QueryEscape(e.Endpoint)+"&region="+e.Region)
	if err != nil {
		t.Fatal(err)
	}
	inside := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	h := &Handler{Store: store, Prefix: prefix, TTL: 5 * time.Second, Work: func(ctx context.Context, ev Event) ([]byte, error) {
		once.Do(func() { close(inside); <-proceed })
		return []byte("done " + ev.Input), nil
	}}
	invoke := func(id string) (Result, error) {
		ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: id})
		return h.Handle(ctx, Event{Key: "report", Input: id})
	}

	first := make(chan Result, 1)
	go func() {
		r, err := invoke("req-1")
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-inside // req-1 holds the key and is working
	if r, err := invoke("req-2"); err != nil || r.Ran || !r.Busy {
		t.Errorf("a second invocation while the first works: %+v, %v; want busy", r, err)
	}
	close(proceed)
	if r := <-first; !r.Ran || r.Token != 1 {
		t.Errorf("first invocation: %+v, want ran with token 1", r)
	}
	r, err := invoke("req-3")
	if err != nil || !r.Ran || r.Token != 2 {
		t.Fatalf("a later invocation: %+v, %v; want ran with token 2", r, err)
	}
	obj, err := store.Get(t.Context(), prefix+"out/report", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Token  uint64 `json:"token"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(obj.Data, &out); err != nil || out.Token != 2 || out.Output != "done req-3" {
		t.Errorf("output %s (%v), want req-3's under token 2", obj.Data, err)
	}
	// The first invocation, had it been frozen before its write and
	// thawed now, is refused by the output itself.
	_, err = fence.Put(t.Context(), store, prefix+"out/report", 1, []byte(`{"token":1,"late":true}`), fence.Options{UniquePayloads: true})
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("a late write of token 1: %v, want fence.ErrStale", err)
	}
}
