package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
	"time"
)

// jsonHandler is the --log-format json handler writing to buf.
func jsonHandler(buf *bytes.Buffer) *lineHandler {
	on, verbose, cmd := true, false, "run"
	return &lineHandler{w: buf, level: new(slog.LevelVar), verbose: &verbose, json: &on, cmd: &cmd, mu: new(sync.Mutex)}
}

// TestLogFormatJSONIsASlogHandler runs slog's own conformance tests on the
// --log-format json handler: groups (WithGroup, slog.Group) nest, empty
// attributes and groups are left out, a record without a time has no
// "time" key, LogValuers are resolved.
func TestLogFormatJSONIsASlogHandler(t *testing.T) {
	var buf bytes.Buffer
	slogtest.Run(t, func(t *testing.T) slog.Handler {
		buf.Reset()
		return jsonHandler(&buf)
	}, func(t *testing.T) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("not one JSON object: %v: %q", err, buf.String())
		}
		return m
	})
}

// TestLogFormatJSONKeepsRecordTime: the time is the record's, when the
// message was logged, not when the handler wrote it.
func TestLogFormatJSONKeepsRecordTime(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 12, 4, 10, 0, 12, 500_000_000, time.FixedZone("CET", 3600))
	r := slog.NewRecord(at, slog.LevelWarn, "renewal slow", 0)
	if err := jsonHandler(&buf).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if want := `{"time":"2026-12-04T09:00:12.5Z","level":"WARN","msg":"renewal slow","cmd":"run"}` + "\n"; buf.String() != want {
		t.Fatalf("got  %s\nwant %s", buf.String(), want)
	}
}

// TestLogFormatGroups: attributes in groups nest in JSON, merging a group
// given in parts, and are dotted in text (under -v for WithAttrs's).
func TestLogFormatGroups(t *testing.T) {
	var buf bytes.Buffer
	h := jsonHandler(&buf)
	log := slog.New(h).With("shard", "s1").WithGroup("store").With("op", "replace")
	log.Warn("slow", slog.Int("ms", 1200), slog.Group("retry", "n", 2))
	want := `{"level":"WARN","msg":"slow","cmd":"run","shard":"s1","store":{"op":"replace","ms":1200,"retry":{"n":2}}}`
	if got := buf.String(); !strings.HasSuffix(got, ","+want[1:]+"\n") {
		t.Fatalf("got  %s\nwant %s after the time", got, want)
	}

	buf.Reset()
	off, verbose := false, true
	h.json, h.verbose = &off, &verbose
	slog.New(h).With("shard", "s1").WithGroup("store").With("op", "replace").Warn("slow", slog.Int("ms", 1200), slog.Group("retry", "n", 2))
	if want := "objlease: warning: slow (shard=s1 store.op=replace store.ms=1200 store.retry.n=2)\n"; buf.String() != want {
		t.Fatalf("got  %q\nwant %q", buf.String(), want)
	}
}
