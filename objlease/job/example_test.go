package job_test

import (
	"context"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/providers/mem"
)

// A job whose output is committed only if its work ended by itself while
// its lease was valid: a worker paused past its lease, or stopped when it
// was lost, commits nothing.
func ExampleJob() {
	ctx := context.Background()
	store := mem.New()
	c, err := objlease.New(store, "leases/report", objlease.Options{TTL: 10 * time.Second, Holder: "worker-1"})
	if err != nil {
		panic(err)
	}
	l, err := c.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	batch := fence.NewBatch(store, "out/report/", l.Token())
	res := (&job.Job{
		Lease: l,
		Task: job.Func(l.Context(), func(ctx context.Context) error {
			return batch.Put(ctx, "summary.csv", []byte("day,total\n"))
		}),
		Grace: time.Second,
		Finish: func() error {
			_, err := batch.Commit(ctx, false)
			return err
		},
		Release: func() error { return l.Release(ctx) },
	}).Run()
	fmt.Println(res.Outcome, res.FinishErr, res.ReleaseErr)
	m, err := fence.ReadCommitted(ctx, store, "out/report/")
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Token, m.Names())
	// Output:
	// done <nil> <nil>
	// 1 [summary.csv]
}
