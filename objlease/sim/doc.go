// Package sim is a deterministic simulation of the lease protocol under
// faults; everything in it is test code (go test ./objlease/sim/).
//
// Many client processes contend for a few leases, and a few campaign in an
// election, over one of five store models (models_test.go: an ideal mem
// store; S3 with MD5 versions, 1 s timestamps and 409 on racing
// conditional writes; GCS with generations and throttling above a write a
// second per object; Azure with 409 BlobAlreadyExists on a create; the
// real file store opened at two roots over one directory, with a wall
// clock that steps), through fault injectors (providers/faulty). Each
// process has its own clock whose rate wanders within the drift bound,
// pauses now and then with all of its goroutines, and drives every public
// operation: acquire, try, renew, release, release by holder name, break,
// force, fence.Put, fence.Delete, fence.Batch commit and collect,
// election.Elector (whose callback keeps writing fenced objects, pausing)
// and election.RunOnce. In half the seeds a shard group (shards_test.go)
// runs too: workers join, own shards, write each shard's output fenced by
// its token, leave, crash and restart. An operator deletes records and
// registers by hand and tampers with records. After every run the checks
// ask: did a fenced register or a prefix ever accept a lower token after a
// higher one, was a token granted twice within one record epoch (the
// stretch between two operator writes), did two holders believe at once,
// did two leaders' callbacks run at once, did two workers' Work for one
// shard run at once, did a shard's output accept a lower token, is every
// register's history linearizable (porcupine), is every committed object
// still there, did a fenced write land on a lease record, and did a
// release that reported the lease lost land after all.
//
// # Jobs under a lease
//
// jobs_test.go simulates what the objlease command builds on the lease:
// runners that acquire a job's lease, start a command under a supervisor
// and run it through package objlease/job (run --commit --once-per, or
// elect, which campaigns again after a loss). The runner, the supervisor
// and the command pause one at a time; commands exit 0 on SIGTERM, ignore
// it, or write once more after it; the store fails and an operator breaks
// the lease. Its checks: no batch committed or tick marked for a command
// that was stopped, had not finished, or exited after a newer grant; no
// stopped command judged anything but lost; no two commands of the lease
// running at once beyond the grace; no command stopped by its supervisor
// while its lease was valid. TestJobCheckerFindsViolations (tagged) turns
// each safeguard of that layer off and finds what it prevents.
//
// # Determinism
//
// Each run executes in a testing/synctest bubble. Simulated real time is
// the bubble's clock: it advances only when every goroutine of the run,
// the library's renewal and expiry goroutines included, is blocked, and it
// jumps straight to the next timer. The library runs unmodified, with its
// background goroutines; every source of randomness (clock rates, faults,
// nonces and their salt from internal/entropy, the workload's choices) is
// a PCG generator seeded from the run's seed. What remains is the order in
// which goroutines run when two of them wake at the same instant. The
// simulation avoids that: every delay it draws has nanosecond resolution,
// goroutines of one process that wait out a pause resume one microsecond
// apart in their order of arrival, and a process clock's timers fire a
// nanosecond after they are made at the earliest, never at the instant
// itself. TestSimulationReproducible runs seeds twice and compares their
// traces and the writes the store applied. The shard group runs in a bubble
// of its own after the leases' and is left out of that comparison: the
// library's scheduler may send several of a worker's renewals at one
// instant, in an order the seed does not fix.
//
// # Commands
//
//	go test -race ./objlease/sim/                               # short: 150 seeds, the models
//	go test -race -tags objlease_unsafe ./objlease/sim/ -run TestCheckerFindsViolations   # the safeguards-off table
//	go test ./objlease/sim/ -run TestSimulationLong -sim.long -timeout 0 -v
//	go test ./objlease/sim/ -run '^TestSimulation$' -sim.from=N -sim.seeds=1 -sim.v   # replay seed N
//	go test -tags objlease_unsafe ./objlease/sim/ -run '^TestSimulation$' -sim.off=DriftMargin   # a safeguard off
//	go test ./objlease/sim/ -run '^TestSimulation$' -sim.strict                        # excuse nothing (gates_test.go)
//	go test ./objlease/sim/ -run TestJobSimulation -sim.long -v                         # the job simulation, 5000 seeds
//	go test -tags objlease_unsafe ./objlease/sim/ -run TestJobCheckerFindsViolations -v  # the job layer's safeguards-off table
//
// docs/reliability.md has the figures.
package sim
