package objlease

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeRecord: DecodeRecord never panics; what it refuses it refuses
// with an *Error naming the key; what it accepts re-encodes, as the
// client writes records, to bytes that decode to the same record. Seeds
// are in testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		const key = "fuzz/key"
		rec, err := DecodeRecord(key, []byte(in))
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Key != key || !(errors.Is(err, ErrBadRecord) || errors.Is(err, ErrNewerSchema)) {
				t.Fatalf("error %v (%T) is not an *Error for %q matching ErrBadRecord or ErrNewerSchema", err, err, key)
			}
			if !strings.Contains(err.Error(), `"`+key+`"`) {
				t.Fatalf("error %q does not name the key", err)
			}
			return
		}
		body, err := encodeRecord(rec)
		if err != nil {
			t.Fatalf("accepted record does not encode: %v", err)
		}
		again, err := DecodeRecord(key, body)
		if err != nil {
			t.Fatalf("re-encoded record %s is refused: %v", body, err)
		}
		if !sameRecord(rec, again) {
			t.Fatalf("record changed on re-encoding:\n%+v\n%+v", rec, again)
		}
	})
}

// sameRecord compares records field by field; times by instant, since a
// time's location does not survive JSON, and data by bytes.
func sameRecord(a, b *Record) bool {
	return a.Schema == b.Schema && a.Name == b.Name && a.Token == b.Token && a.Holder == b.Holder &&
		a.Nonce == b.Nonce && a.State == b.State && a.TTLMillis == b.TTLMillis &&
		a.AcquiredAt.Equal(b.AcquiredAt) && a.WrittenAt.Equal(b.WrittenAt) &&
		a.Renewals == b.Renewals && bytes.Equal(a.Data, b.Data)
}
