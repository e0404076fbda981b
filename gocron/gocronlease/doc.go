// Package gocronlease runs gocron v2 jobs (github.com/go-co-op/gocron/v2)
// on several schedulers at once, coordinated through objlease leases in
// an object store (S3, GCS, Azure Blob, a local directory) instead of a
// database or Redis.
//
// It lives in a module of its own, github.com/objlease/objlease/gocron,
// so that the core module does not depend on gocron. Its name is not
// gocron's own, so that a program imports both without an alias.
//
// gocron offers two ways to share jobs between schedulers, and this
// package implements both:
//
//   - Elector (gocron.WithDistributedElector): one scheduler leads and
//     runs every job; the others skip theirs. The Elector campaigns for
//     one lease in the background, and IsLeader returns nil only while
//     that lease is valid (Lease.ValidFor, checked at each call).
//   - Locker (gocron.WithDistributedLocker, or gocron.WithDistributedJobLocker
//     for one job): each run of a job takes a lease of its own, keyed by
//     the job's name, and gives it back when the run ends. Jobs spread
//     over the schedulers.
//
// # Once per tick
//
// gocron's Locker only holds the lock for the length of a run: a fast job
// whose lock is given back before a second scheduler's trigger of the same
// scheduled time arrives runs twice. Given the period of a job
// (LockerConfig.Period, Periods), the Locker keeps the job to one run per
// tick of that period with package tick of objlease: Lock names the tick
// by the store's time of the lease's acquisition (tick.Now, tick.Of:
// periods aligned to the Unix epoch, a trigger slightly early counts for
// the period it precedes), refuses with ErrTickDone a tick whose mark says
// it was run, and Unlock marks the tick done under the run's lease, a write
// fenced with its token. gocron does not tell Lock which scheduled time a
// trigger is for, nor Unlock whether the run succeeded: the tick is judged
// by the store's clock, and marked done whatever the run returned, as
// gocron itself runs a failed job again only at its next trigger.
//
// A run whose lease was lost before it ended, or whose scheduler died
// before Unlock, leaves its tick open: a later trigger of the same tick
// would run it again. Where the schedulers trigger each job once per tick
// and at about the same time, none does: a lease held by a dead scheduler
// is taken over only after its TTL, seen from the other schedulers'
// triggers, which by then are for a later tick; only a trigger later than
// that by a TTL or more could find the tick open.
//
// # Fencing tokens
//
// Every lease carries a fencing token higher than any before it for its
// key: a new token for each run under the Locker, one per term of
// leadership under the Elector. Wrap (Locker.Wrap, Elector.Wrap) makes a
// gocron task of a job function whose context ends when the lease is lost,
// and carries the lease: TokenFrom, TickFrom and LeaseFrom read it. A
// lease makes overlap unlikely, not impossible: a scheduler paused past its
// lease (a GC pause, a frozen VM) may still be running the job when another
// has taken over. The job's side effects are safe only where they carry the
// token to a resource that refuses a token lower than one it has seen
// (package github.com/objlease/objlease/objlease/fence makes an object
// store such a resource).
//
// A scheduler that dies without releasing leaves its lease held until the
// lease's TTL has passed: only then do the others take its jobs over, with
// higher tokens.
package gocronlease
