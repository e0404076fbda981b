// Package resourcelock is a client-go leader election lock
// (k8s.io/client-go/tools/leaderelection/resourcelock.Interface) kept in
// object storage as an objlease lease record, so that Kubernetes-style
// controllers, or any program using client-go's leaderelection package,
// can elect a leader through S3, GCS, Azure Blob or a local directory
// instead of the Kubernetes API server.
//
// It lives in a module of its own, github.com/objlease/objlease/k8s, so
// that the core module does not depend on client-go.
//
//	lock, err := resourcelock.New(store, "leases/controller", hostname)
//	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
//		Lock:          lock,
//		LeaseDuration: 15 * time.Second,
//		RenewDeadline: 10 * time.Second,
//		RetryPeriod:   2 * time.Second,
//		Callbacks: leaderelection.LeaderCallbacks{
//			OnStartedLeading: func(ctx context.Context) { run(ctx, lock.Token()) },
//			OnStoppedLeading: func() {},
//		},
//	})
//
// # The record
//
// The object at the key is an objlease lease record (see objlease.Record):
// its holder is the leader's identity, its TTL the lease duration, and its
// data the client-go LeaderElectionRecord as JSON, so that `objlease
// inspect` shows who leads and since when. Every write is conditional: a
// create only if the key is absent, an update only if the object is still
// the version this lock last read or wrote. A write whose reply was lost
// (providers.ErrUnknownOutcome) is resolved by re-reading the record: each
// write carries a nonce of its own, so the lock recognises its own write
// if it landed, tries again with the same bytes if nothing changed, and
// reports a conflict if someone else wrote first; a read error that
// re-reading will not cure (a missing bucket, refused credentials) ends it
// at once, with an error matching objlease.ErrAmbiguous and the cause.
// objlease's own writes follow the same rules, in the same code. An object
// at the key that is not such a record, or whose holder, TTL and data
// disagree (a record changed by hand), is an error naming the key
// (ErrBadRecord); the lock never overwrites it.
//
// # Fencing tokens
//
// The record's token increases by at least one at every change of leader
// (a create, a takeover, a new term after a release, or a process that
// restarts with the same identity) and stays the same while the leader
// renews. Token returns the token of this lock's term. Leader election
// alone only makes overlap unlikely: a leader that pauses (GC, a frozen
// VM) past its lease keeps acting as leader after another has taken over.
// A resource that remembers the highest token it has seen and refuses
// lower ones turns such a late write into a refused one; package
// github.com/objlease/objlease/objlease/fence makes an object store such
// a resource. client-go's own locks have no such token.
//
// # What it keeps of client-go's assumptions
//
// client-go judges expiry on the observer's own clock: a contender takes
// over once it has seen the record unchanged for LeaseDuration since it
// first saw it (its observedTime), never by comparing timestamps written
// by another machine. objlease's observed rule is the same, so the lock
// needs no clock agreement between machines. What client-go assumes and
// this lock keeps: clocks run at about the same rate (client-go adds no
// drift margin; the leader's RenewDeadline, shorter than LeaseDuration, is
// the margin), and identities are unique among the candidates. A record
// written by a plain objlease holder (no LeaderElectionRecord in its
// data) is reported to client-go with a lease duration of its TTL plus
// objlease's default drift bound (1 %), rounded up to whole seconds, so
// that electors wait out such a holder as objlease's own contenders do.
package resourcelock
