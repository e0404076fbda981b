package main

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopAll()
	os.Exit(code)
}

// Two executions of one day's job against the GCS emulator, the second
// started after the first took the lease (a retried execution): the
// second commits under the next token, and the first, throttled past its
// lease and resuming with its old token, is refused at commit.
func TestReportStaleExecutionRefused(t *testing.T) {
	g := emulator.FakeGCS(t)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	prefix := emulator.Prefix(t)
	store, _, err := providers.Open(t.Context(), "gs://"+g.Bucket+"/")
	if err != nil {
		t.Fatal(err)
	}
	rows := func(text string) func(context.Context, string) (map[string][]byte, error) {
		return func(context.Context, string) (map[string][]byte, error) {
			return map[string][]byte{"summary.csv": []byte(text)}, nil
		}
	}
	first := &Report{Store: store, Prefix: prefix, TTL: 5 * time.Second, Holder: "exec-1", Rows: rows("first")}
	m, err := first.Run(t.Context(), "2026-12-01")
	if err != nil || m.Token != 1 {
		t.Fatalf("first execution: %+v, %v; want committed by token 1", m, err)
	}
	second := &Report{Store: store, Prefix: prefix, TTL: 5 * time.Second, Holder: "exec-2", Rows: rows("second")}
	if m, err = second.Run(t.Context(), "2026-12-01"); err != nil || m.Token != 2 {
		t.Fatalf("second execution: %+v, %v; want committed by token 2", m, err)
	}
	// The first execution's batch, written with token 1 after token 2
	// committed.
	late := fence.NewBatch(store, prefix+"out/2026-12-01/", 1)
	if err := late.Put(t.Context(), "retry.csv", []byte("stale")); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Commit(t.Context(), false); !errors.Is(err, fence.ErrStale) {
		t.Errorf("a commit of token 1 after token 2: %v, want fence.ErrStale", err)
	}
	got, err := fence.ReadCommitted(t.Context(), store, prefix+"out/2026-12-01/")
	if err != nil || got.Token != 2 {
		t.Fatalf("committed: %+v, %v; want token 2", got, err)
	}
	obj, err := store.Get(t.Context(), got.Objects["summary.csv"].Key, 0)
	if err != nil || string(obj.Data) != "second" {
		t.Errorf("summary.csv: %q, %v; want the second execution's", obj.Data, err)
	}
}
