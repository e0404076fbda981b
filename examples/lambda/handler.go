// Command lambda is an AWS Lambda function that does the work for a key
// in one invocation at a time, however many invocations the event source
// delivers at once (SQS and EventBridge deliver at least once), and fences
// its output so that an invocation frozen mid-write cannot overwrite a
// newer one's.
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
	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/s3store"
)

// Event names the key to work on.
type Event struct {
	Key   string `json:"key"`
	Input string `json:"input"`
}

// Result says whether this invocation did the work, and under which token.
type Result struct {
	Ran   bool   `json:"ran"`
	Token uint64 `json:"token,omitempty"`
	// Busy: another invocation held the key; the event is done by it.
	Busy bool `json:"busy,omitempty"`
}

// Handler does one key's work under its lease.
type Handler struct {
	Store  providers.Store
	Prefix string        // of leases/KEY and out/KEY
	TTL    time.Duration // lease TTL, well under the function's timeout
	// Work computes the output; it must stop when ctx ends (the lease
	// was lost).
	Work func(ctx context.Context, ev Event) ([]byte, error)
}

// Handle takes the key's lease without waiting (a second invocation for a
// held key returns Busy at once), does the work (stopped if the lease is
// lost), writes the output fenced by the token if the work returned by
// itself while the lease was valid, and releases.
func (h *Handler) Handle(ctx context.Context, ev Event) (Result, error) {
	holder := "lambda"
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		holder = "lambda/" + lc.AwsRequestID
	}
	c, err := objlease.New(h.Store, h.Prefix+"leases/"+ev.Key, objlease.Options{TTL: h.TTL, Holder: holder})
	if err != nil {
		return Result{}, err
	}
	l, err := c.TryAcquire(ctx)
	if errors.Is(err, objlease.ErrHeld) {
		return Result{Busy: true}, nil
	}
	if err != nil {
		return Result{}, err
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
			_, err = fence.Put(ctx, h.Store, h.Prefix+"out/"+ev.Key, l.Token(), payload, fence.Options{UniquePayloads: true})
			return err
		},
		Release: func() error { return l.Release(context.WithoutCancel(ctx)) },
	}).Run()
	switch res.Outcome {
	case job.Done:
		if res.FinishErr != nil {
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
