package objlease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// schemaVersion is the version of the record format this package writes.
const schemaVersion = 1

// Size bounds. Reads of a lease object are bounded so that a huge foreign
// object at a lease key cannot exhaust memory.
const (
	MaxDataSize   = 4 << 10  // user data carried in a record
	MaxRecordSize = 64 << 10 // bytes read from a lease key
	// MaxTTL bounds a lease's TTL, so that no record's TTL can overflow a
	// time.Duration or keep a key locked for ever.
	MaxTTL = 366 * 24 * time.Hour
)

// State is a record's state.
type State string

// Record states. A record is never deleted on the normal path: its token
// must survive release so that the next holder's token is higher.
const (
	StateHeld     State = "held"
	StateReleased State = "released"
)

// Record is the JSON document stored at a lease key.
type Record struct {
	// Schema is the record format version (1); it also marks the object as an
	// objlease record.
	Schema int    `json:"objlease"`
	Name   string `json:"name"`
	// Token is the fencing token: it increases by at least one with every
	// acquisition and never goes back.
	Token  uint64 `json:"token"`
	Holder string `json:"holder,omitempty"`
	// Nonce is unique to each write (a per-client salt, then random bits),
	// so a writer recognises its own write after a lost response by its
	// holder and nonce, and a record's bytes (hence its version) never
	// repeat even on stores whose versions are content hashes.
	Nonce string `json:"nonce"`
	State State  `json:"state"`
	// TTLMillis is the lease duration the holder promised to respect. The
	// holder counts exactly this: Options.TTL is whole milliseconds.
	TTLMillis int64 `json:"ttl_ms"`
	// Timestamps are the writer's wall clock, for people reading the record.
	// The protocol never compares them across machines.
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	WrittenAt  time.Time `json:"written_at"`
	Renewals   uint64    `json:"renewals"`
	Data       []byte    `json:"data,omitempty"`
}

// ttl returns the record's lease duration.
func (r Record) ttl() time.Duration { return time.Duration(r.TTLMillis) * time.Millisecond }

func encodeRecord(r *Record) ([]byte, error) {
	if len(r.Data) > MaxDataSize {
		return nil, fmt.Errorf("%w: data is %d bytes, more than %d", ErrInvalidOptions, len(r.Data), MaxDataSize)
	}
	return json.Marshal(r)
}

// DecodeRecord parses and validates a lease record read from key. Errors are
// *Error values naming key.
func DecodeRecord(key string, b []byte) (*Record, error) {
	bad := func(format string, args ...any) error {
		return recordError(key, ErrBadRecord, format, args...)
	}
	if len(b) > MaxRecordSize {
		return nil, bad("object is %d bytes, more than a record can be (%d)", len(b), MaxRecordSize)
	}
	// Read the schema first, so that a newer record with fields we do not
	// know is reported as newer rather than malformed.
	var head struct {
		Schema *int `json:"objlease"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, bad("not JSON: %v", err)
	}
	if head.Schema == nil {
		return nil, bad(`no "objlease" schema field: not an objlease record`)
	}
	if *head.Schema > schemaVersion {
		return nil, recordError(key, ErrNewerSchema, "schema %d, this objlease reads up to %d", *head.Schema, schemaVersion)
	}
	if *head.Schema < 1 {
		return nil, bad("schema %d is not a valid version", *head.Schema)
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, bad("invalid record: %v", err)
	}
	if dec.More() {
		return nil, bad("trailing data after the record")
	}
	switch {
	case r.State != StateHeld && r.State != StateReleased:
		return nil, bad("unknown state %q", r.State)
	case r.Token == 0:
		return nil, bad("token is 0; tokens start at 1")
	case r.Nonce == "":
		return nil, bad("empty nonce")
	case r.TTLMillis <= 0:
		return nil, bad("ttl_ms %d is not positive", r.TTLMillis)
	case r.TTLMillis > MaxTTL.Milliseconds():
		return nil, bad("ttl_ms %d is more than the longest TTL, %v", r.TTLMillis, MaxTTL)
	case len(r.Data) > MaxDataSize:
		return nil, bad("data is %d bytes, more than %d", len(r.Data), MaxDataSize)
	}
	return &r, nil
}
