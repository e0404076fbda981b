//go:build objlease_unsafe

// Package safeguards holds switches that turn off the protocol's safety
// measures one at a time. They exist only so that the simulation and the
// tests built with the objlease_unsafe tag can show that each measure
// prevents a violation. The package builds only with that tag: a normal
// build cannot import it, and there each measure is a constant that is
// always on (the safeguards_on.go file of each package that reads one).
package safeguards

import "sync/atomic"

// Each switch is on (true) unless a simulation turns it off.
var (
	// DriftMargin: the holder counts validity as TTL × (1 − b) from the
	// moment it sent its write, and contenders wait TTL × (1 + b). Off: both
	// use a bare TTL, and the holder counts from when the reply arrived.
	DriftMargin atomic.Bool
	// KeepRecordOnRelease: release marks the record released and keeps its
	// token. Off: release deletes the record, so the next token is 1 again.
	KeepRecordOnRelease atomic.Bool
	// NonceCheck: a write whose outcome is unknown is resolved by reading
	// back its nonce. Off: it is assumed to have landed.
	NonceCheck atomic.Bool
	// UniqueNonces: nonces are unique whatever SessionOptions.Rand is
	// seeded with. Off: they come from the client's seeded source alone.
	UniqueNonces atomic.Bool
	// OwnWriteCheck: a write is recognised as this holder's own only by its
	// holder and its nonce, and a holder only ever replaces a record that
	// carries its own last write. Off: a matching nonce, or a matching token,
	// is taken as proof.
	OwnWriteCheck atomic.Bool
	// ForceWaits: Options.Force repairs a bad object only after seeing it
	// unchanged for a whole TTL × (1 + b). Off: it overwrites at once.
	ForceWaits atomic.Bool
	// UniqueTombstones: fence.Delete writes a tombstone whose bytes are
	// unique, so its version cannot repeat on S3. Off: an empty tombstone.
	UniqueTombstones atomic.Bool
	// CallbackBeforeRelease: a lease's context ends, and an elector's
	// callback returns, before the released record is written. Off: the
	// record is written first.
	CallbackBeforeRelease atomic.Bool
	// PathLock: the file store's lock belongs to the object's file, so two
	// stores opened at different roots over one directory exclude each
	// other. Off: a lock per store root.
	PathLock atomic.Bool
	// JudgeByValidity: a job's task counts as done only if it was not
	// stopped and its lease was still valid when its exit was seen. Off:
	// its exit status decides, unless the runner itself had stopped it.
	JudgeByValidity atomic.Bool
	// DeadlineOnRenewal: a supervisor learns each new end of the lease's
	// validity as soon as a renewal lands. Off: the runner polls the
	// validity every 100 ms to tell it.
	DeadlineOnRenewal atomic.Bool
	// StopTaskDirectly: a runner stopping its task after a loss signals
	// the task's process group (and, at SIGKILL, all it started, and the
	// supervisor itself) directly. Off: only through the supervisor, which
	// may be paused.
	StopTaskDirectly atomic.Bool
)

func init() {
	for _, s := range []*atomic.Bool{&DriftMargin, &KeepRecordOnRelease, &NonceCheck, &UniqueNonces,
		&OwnWriteCheck, &ForceWaits, &UniqueTombstones, &CallbackBeforeRelease, &PathLock,
		&JudgeByValidity, &DeadlineOnRenewal, &StopTaskDirectly} {
		s.Store(true)
	}
}
