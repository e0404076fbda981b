// Package objlease implements leases and fencing tokens stored in object
// storage (S3, GCS, Azure Blob, a local directory), with no server of its
// own: a lease record is an object, and every change to it is a
// conditional write that the store refuses if the record changed since it
// was read.
//
// # What a lease promises
//
// A holder's Lease says that nobody else holds the lease until the
// lease's context ends. The context is cancelled, with a cause matching
// ErrLeaseLost, no later than the moment the holder's safe validity ends,
// which is before any contender can take over. That promise holds only
// while the holder acts on it in time: a process can check its lease and
// then pause (a GC pause, a frozen VM, a slow disk) past its end. No lease
// can prevent that; fencing can make it harmless (see below).
//
// # Which clocks it trusts
//
// Expiry never depends on two machines agreeing on the time. It depends on
// a bound on how fast each clock runs, Options.DriftBound (default 1 %):
//
//   - The observed rule (always on): a contender takes over only after it
//     has seen the same record version unchanged for TTL × (1 + DriftBound)
//     on its own clock, and the holder stops trusting its lease at
//     TTL × (1 − DriftBound) − min(100 ms, TTL/10) after it sent its last
//     successful renewal: the last term covers a context that a loaded
//     machine ends late (docs/protocol.md has the measured bound).
//   - The store-clock rule (opt-in, Options.StoreClock): a contender may
//     take over a record whose age by the store's own clock (its Date
//     minus the record's Last-Modified) exceeds the TTL plus a margin. It
//     assumes the store's clocks agree within Options.StoreClockMargin; where
//     the store reports no time, the observed rule decides.
//
// The default clock (clock.Real) counts time the machine spent suspended
// and never steps; see package clock.
//
// # Where fencing comes in
//
// Every acquisition carries a fencing token (Lease.Token) higher than any
// before it for that key. A resource that remembers the highest token it
// has seen and refuses lower ones turns a paused holder's late write into
// a refused one: that is mutual exclusion; the lease alone only lowers the
// odds of overlap. Package fence makes the store itself such a resource
// for your objects; docs/fencing.md says what each store guarantees.
//
// # Getting started
//
// One lease, one line:
//
//	c, err := objlease.New(store, "leases/nightly", objlease.Options{TTL: 30 * time.Second})
//	lease, err := c.Acquire(ctx) // then work with lease.Context(), stamping lease.Token()
//
// A client from New has a session of its own, whose scheduler runs only
// while the client holds or awaits a lease. A process that holds or awaits
// many leases makes one Session and its clients from it: one scheduler
// then renews and watches them all, and Session.Close releases them.
// Packages election, semaphore and shard build on sessions.
package objlease
