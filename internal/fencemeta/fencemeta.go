// Package fencemeta names the metadata that package fence writes on the
// objects it fences, for fence, which writes it, and for package objlease,
// which must never take such an object for a lease record. It imports
// nothing, so that either may import it.
package fencemeta

// Metadata keys written on fenced objects.
const (
	// TokenKey holds the highest token that wrote the object, in decimal.
	TokenKey = "objlease-token"
	// TombstoneKey is "true" on a tombstone: an object deleted through
	// fence, kept so that its token survives.
	TombstoneKey = "objlease-tombstone"
)
