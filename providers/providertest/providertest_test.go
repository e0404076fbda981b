package providertest_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/providertest"
)

const envBroken = "OBJLEASE_PROVIDERTEST_BROKEN"

// The suite must refuse drivers with the faults seen in real servers and
// easy to write by mistake. (Some faults cannot reach it from a driver:
// the Bucket names the operation and key in every error, refuses an empty
// version and fails a call whose context is done before the driver sees it.) Each runs in a copy of this test binary, since
// the suite fails the test it is given.
func TestRejectsBrokenStores(t *testing.T) {
	for fault, want := range map[string]string{
		"ignores-preconditions": "winners among",
		"skips-identical-write": "does not declare VersionsRepeat",
		"overlapping-pages":     "duplicate keys",
		"nobucket-notfound":     "want bucket does not exist",
		"as-anything":           "As accepted a target of no type the store knows",
	} {
		t.Run(fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokenStore$", "-test.v")
			cmd.Env = append(os.Environ(), envBroken+"="+fault)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that %s:\n%s", fault, out)
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("the suite failed, but without %q:\n%s", want, out)
			}
		})
	}
}

// TestHelperBrokenStore runs the suite on a broken store for TestRejectsBrokenStores.
func TestHelperBrokenStore(t *testing.T) {
	fault := os.Getenv(envBroken)
	if fault == "" {
		t.Skip("run as a separate process by TestRejectsBrokenStores")
	}
	cfg := providertest.Config{Bucket: providers.NewBucket(broken{mem.NewDriver(), fault}), Racers: 8, Rounds: 3, MissingBucket: mem.New(), CreatesBuckets: true}
	if fault == "nobucket-notfound" {
		cfg.CreatesBuckets = false // mem then says "not found" where a bucket is missing
	}
	providertest.Run(t, cfg)
}

func (b broken) As(target any) bool { return b.fault == "as-anything" || b.Driver.As(target) }

// broken is a mem driver with one fault.
type broken struct {
	driver.Driver
	fault string
}

// current reads key's version, or "" if it is absent.
func (b broken) current(ctx context.Context, key string) string {
	a, err := b.Driver.Stat(ctx, key)
	if err != nil {
		return ""
	}
	return a.Version
}

func (b broken) Create(ctx context.Context, key string, data []byte, md map[string]string) (driver.WriteResult, error) {
	if b.fault == "ignores-preconditions" {
		if v := b.current(ctx, key); v != "" {
			return b.Driver.Replace(ctx, key, data, md, v)
		}
	}
	return b.Driver.Create(ctx, key, data, md)
}

func (b broken) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (driver.WriteResult, error) {
	switch b.fault {
	case "ignores-preconditions":
		ifVersion = b.current(ctx, key)
	case "skips-identical-write":
		if r, err := b.Driver.Read(ctx, key, 0); err == nil {
			old, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.Version == ifVersion && bytes.Equal(old, data) {
				return driver.WriteResult{Version: r.Version}, nil
			}
		}
	}
	return b.Driver.Replace(ctx, key, data, md, ifVersion)
}

func (b broken) List(ctx context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
	p, err := b.Driver.List(ctx, prefix, pageToken, pageSize)
	if b.fault == "overlapping-pages" && p.NextToken != "" && len(p.Objects) > 1 {
		p.NextToken = p.Objects[len(p.Objects)-2].Key
	}
	return p, err
}

// A store that lists out of key order conforms when it says so: Unordered
// itself passes.
func TestUnorderedConforms(t *testing.T) {
	providertest.Run(t, providertest.Config{
		Bucket: providertest.Unordered(mem.New()), Racers: 5, Rounds: 5,
		MissingBucket: providertest.Unordered(mem.New()), CreatesBuckets: true, Unordered: true,
	})
}
