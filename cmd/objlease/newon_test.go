package main

import (
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// newOn is objlease.New on a session of its own with so: the test's
// clock.
func newOn(store providers.Store, key string, so objlease.SessionOptions, opts objlease.Options) (*objlease.Client, error) {
	return newClient(store, key, opts, so)
}
