package file_test

import (
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// newOn is objlease.New on a session of its own with so: the test's
// clock, logger or seed.
func newOn(store providers.Store, key string, so objlease.SessionOptions, opts objlease.Options) (*objlease.Client, error) {
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	return sess.Client(key, opts)
}
