// Package safeguards holds switches that turn off the protocol's safety
// measures one at a time. They exist only so that the simulation can show
// that its checker finds the violations each measure prevents; nothing
// outside this module can reach them, and they are never off in normal use.
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
)

func init() {
	DriftMargin.Store(true)
	KeepRecordOnRelease.Store(true)
	NonceCheck.Store(true)
}
