// Package sim is a deterministic simulation of the lease protocol under
// faults; everything in it is test code (go test ./objlease/sim/).
//
// Many client processes contend for a few leases over the mem store,
// through fault injectors (providers/faulty). Each process has its own
// clock whose rate wanders within the drift bound, pauses now and then with
// all of its goroutines (between any check and any action), and holding a
// lease writes a fenced register (fence.Put) and commits to a guarded
// prefix (fence.Batch). After every run the checks ask: did the register or
// the prefix ever accept a lower token after a higher one, was a token
// granted twice, did two holders believe they held a lease at the same
// real time, is the register's history linearizable (porcupine), and is
// every committed object still there.
//
// # Determinism
//
// Each run executes in a testing/synctest bubble. Simulated real time is
// the bubble's clock: it advances only when every goroutine of the run,
// the library's renewal and expiry goroutines included, is blocked, and it
// jumps straight to the next timer. The library runs unmodified, with its
// background goroutines; every source of randomness (clock rates, faults,
// nonces, the workload's choices) is a PCG generator seeded from the run's
// seed. What remains is the order in which goroutines run when two of them
// wake at the same instant. The simulation avoids that: every delay it
// draws has nanosecond resolution, goroutines of one process that wait out
// a pause resume one microsecond apart in their order of arrival, and a
// process clock's timers fire a nanosecond after they are made at the
// earliest, never at the instant itself. TestSimulationReproducible runs
// seeds twice and compares their traces and the writes the store applied.
//
// # Commands
//
//	go test -race ./objlease/sim/                               # short: 150 seeds + the checks-are-not-blind runs
//	go test ./objlease/sim/ -run TestSimulationLong -sim.long -timeout 0 -v
//	go test ./objlease/sim/ -run '^TestSimulation$' -sim.from=N -sim.seeds=1 -sim.v   # replay seed N
//	go test ./objlease/sim/ -run '^TestSimulation$' -sim.off=DriftMargin               # a safeguard off
package sim
