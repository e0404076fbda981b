// Command lambda is an AWS Lambda function that does the work for a key
// in one invocation at a time, and the work of an event once, however
// many times the event source delivers it (SQS and EventBridge deliver at
// least once, late and out of order), and fences its output so that an
// invocation frozen mid-write cannot overwrite a newer one's.
//
// An invocation that finds the key held returns an error (ErrBusy), so
// that the event source delivers the event again later: acknowledged at
// once, it would be lost if the invocation holding the key then failed.
// One that finds its event's id among the ticks the key's mark
// (package tick) remembers done returns at once without an error: the
// event is done.
//
// Environment: OBJLEASE_URL, the prefix of the leases and outputs, for
// example s3://my-bucket/jobs/ (credentials from the function's role).
// The lease's TTL is well under the function's timeout; the handler
// releases the lease before it returns, because Lambda freezes the
// process between invocations and no renewal runs while it is frozen (see
// docs/serverless.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/s3store"
)

// Event names the key to work on.
type Event struct {
	// ID is the event's id, the same in every delivery of it (SQS's
	// messageId, EventBridge's id): 1 to 512 bytes of printable Unicode
	// (tick.CheckID).
	ID    string `json:"id"`
	Key   string `json:"key"`
	Input string `json:"input"`
}

// Result says whether this invocation did the work, and under which token;
// or, if an earlier delivery of the event did, under which token that was.
type Result struct {
	Ran   bool   `json:"ran"`
	Token uint64 `json:"token,omitempty"`
	// DoneBy is the token under which an earlier delivery did the event's
	// work (Ran is then false).
	DoneBy uint64 `json:"done_by,omitempty"`
}

// ErrBusy: another invocation holds the event's key. The event is not
// done: the error makes the event source deliver it again later.
var ErrBusy = errors.New("another invocation holds the key; deliver the event again later")

// Handler does one key's work under its lease.
type Handler struct {
	Store  providers.Store
	Prefix string        // of leases/KEY and out/KEY
	TTL    time.Duration // lease TTL, well under the function's timeout
	// Work computes the output; it must stop when ctx ends (the lease
	// was lost).
	Work func(ctx context.Context, ev Event) ([]byte, error)
}

// Handle takes the key's lease without waiting (an invocation for a held
// key returns ErrBusy at once, to be delivered again), returns at once if
// the key's mark remembers the event done, else does the work (stopped if
// the lease is lost) and, if the work returned by itself while the lease
// was valid, writes the output fenced by the token and marks the event
// done; and releases.
func (h *Handler) Handle(ctx context.Context, ev Event) (Result, error) {
	if err := tick.CheckID(ev.ID); err != nil {
		return Result{}, fmt.Errorf("event for %q: %w", ev.Key, err)
	}
	holder := "lambda"
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		holder = "lambda/" + lc.AwsRequestID
	}
	key := h.Prefix + "leases/" + ev.Key
	// The mark's token is a floor for the lease's: a lease record deleted
	// by hand cannot start its tokens again below it.
	floor, err := tick.Floor(ctx, h.Store, key)
	if err != nil {
		return Result{}, err
	}
	c, err := objlease.New(h.Store, key, objlease.Options{TTL: h.TTL, Holder: holder, MinToken: &floor})
	if err != nil {
		return Result{}, err
	}
	l, err := c.TryAcquire(ctx)
	if errors.Is(err, objlease.ErrHeld) {
		return Result{}, fmt.Errorf("event %s for %q: %w", ev.ID, ev.Key, ErrBusy)
	}
	if err != nil {
		return Result{}, err
	}
	marks, err := tick.Read(ctx, h.Store, key)
	if err == nil {
		err = marks.Check(l)
	}
	if err != nil {
		l.Release(context.WithoutCancel(ctx))
		return Result{}, err
	}
	if done := marks.Find(ev.ID); done != nil {
		return Result{DoneBy: done.Token}, l.Release(context.WithoutCancel(ctx))
	}
	// The work runs under package job: its output is written only if it
	// returned by itself while the lease was valid. Released before
	// returning, whatever happens: a frozen process renews nothing, so a
	// lease left held would block the key for a TTL.
	var out []byte
	res := (&job.Job{
		Lease: l,
		Task: job.Func(ctx, func(ctx context.Context) (err error) {
			out, err = h.Work(ctx, ev)
			return err
		}),
		Finish: func() error {
			// The token and the request in the bytes keep every payload
			// unique, which fence.Put needs on S3 (an ETag repeats for
			// identical bytes).
			payload, err := json.Marshal(map[string]any{"token": l.Token(), "holder": holder, "output": string(out)})
			if err != nil {
				return err
			}
			if _, err := fence.Put(ctx, h.Store, h.Prefix+"out/"+ev.Key, l.Token(), payload, fence.Options{UniquePayloads: true}); err != nil {
				return err
			}
			// Then the event is done: a later delivery finds it so.
			return tick.Done(ctx, h.Store, l, ev.ID)
		},
		Release: func() error { return l.Release(context.WithoutCancel(ctx)) },
	}).Run()
	switch res.Outcome {
	case job.Done:
		if res.FinishErr != nil {
			// Retried: the output or the mark may not have been written.
			return Result{}, fmt.Errorf("writing the output of %q: %w", ev.Key, res.FinishErr)
		}
		return Result{Ran: true, Token: l.Token()}, nil
	case job.Lost:
		// The event is retried: its work may not have been done.
		return Result{}, fmt.Errorf("%q: %w", ev.Key, res.Cause)
	default:
		return Result{}, fmt.Errorf("%q: the work failed: %s", ev.Key, res.Exit.How)
	}
}

func main() {
	ctx := context.Background()
	store, prefix, err := providers.Open(ctx, os.Getenv("OBJLEASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	h := &Handler{Store: store, Prefix: prefix, TTL: 30 * time.Second, Work: func(ctx context.Context, ev Event) ([]byte, error) {
		return []byte("processed " + ev.Input), nil
	}}
	lambda.Start(h.Handle)
}
