// Command cloudrun is a Cloud Run job (or any batch job) that writes a
// day's report under an output prefix guarded by a fenced batch commit:
// it takes the job's lease, writes the report's objects as a batch
// stamped with the lease's token, and commits them only if no newer
// token has committed the prefix. A job whose execution was duplicated
// or retried while an older attempt was still running, or throttled
// until its lease expired, cannot overwrite a newer attempt's output.
//
// Environment: OBJLEASE_URL, for example gs://my-bucket/reports/ (the
// job's service account's credentials); REPORT_DAY, the day to write
// (default: yesterday, UTC). Cloud Run jobs get CPU for their whole run,
// so the lease is renewed while the job works; a Cloud Run service
// between requests does not (docs/serverless.md).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/gcsstore"
)

// Report writes one day's report.
type Report struct {
	Store  providers.Store
	Prefix string // of leases/ and out/DAY/
	TTL    time.Duration
	Holder string
	// Rows computes the report's objects; it must stop when ctx ends.
	Rows func(ctx context.Context, day string) (map[string][]byte, error)
}

// Run writes and commits day's report under the job's lease, waiting for
// the lease as long as ctx allows, and returns the committed manifest.
func (r *Report) Run(ctx context.Context, day string) (*fence.Manifest, error) {
	c, err := objlease.New(r.Store, r.Prefix+"leases/report-"+day, objlease.Options{TTL: r.TTL, Holder: r.Holder})
	if err != nil {
		return nil, err
	}
	l, err := c.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// Under package job: the batch is committed only if Rows returned by
	// itself while the lease was valid.
	b := fence.NewBatch(r.Store, r.Prefix+"out/"+day+"/", l.Token())
	var m *fence.Manifest
	res := (&job.Job{
		Lease: l,
		Task: job.Func(ctx, func(ctx context.Context) error {
			objects, err := r.Rows(ctx, day)
			if err != nil {
				return err
			}
			for name, data := range objects {
				if err := b.Put(ctx, name, data); err != nil {
					return err
				}
			}
			return nil
		}),
		Finish: func() (err error) {
			// false: replace what an older token committed, keep nothing of it.
			m, err = b.Commit(ctx, false)
			return err
		},
		Release: func() error { return l.Release(context.WithoutCancel(ctx)) },
	}).Run()
	switch res.Outcome {
	case job.Done:
		return m, res.FinishErr
	case job.Lost:
		return nil, fmt.Errorf("report %s: %w", day, res.Cause)
	default:
		return nil, fmt.Errorf("report %s: %s", day, res.Exit.How)
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, prefix, err := providers.Open(ctx, os.Getenv("OBJLEASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	day := os.Getenv("REPORT_DAY")
	if day == "" {
		day = time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	}
	host, _ := os.Hostname()
	r := &Report{Store: store, Prefix: prefix, TTL: 30 * time.Second, Holder: host + "/" + os.Getenv("CLOUD_RUN_EXECUTION"),
		Rows: func(ctx context.Context, day string) (map[string][]byte, error) {
			return map[string][]byte{"summary.csv": []byte("day,total\n" + day + ",0\n")}, nil
		}}
	m, err := r.Run(ctx, day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("committed %s by token %d: %v\n", day, m.Token, m.Names())
}
