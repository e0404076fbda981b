package providers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

// plain is a driver that reads no bucket settings: embedding only the
// Driver interface hides mem's.
type plain struct{ driver.Driver }

// inspector reads settings as given, or waits for its context if hang.
type inspector struct {
	driver.Driver
	s    driver.BucketSettings
	hang bool
}

func (d inspector) BucketSettings(ctx context.Context, _ string) (driver.BucketSettings, error) {
	if d.hang {
		<-ctx.Done()
		return driver.BucketSettings{}, ctx.Err()
	}
	return d.s, nil
}

func (d inspector) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	return driver.LifecycleRule{Format: "test", Text: prefix}
}

func TestBucketSettings(t *testing.T) {
	ctx := t.Context()

	s, err := providers.NewBucket(plain{mem.NewDriver()}).BucketSettings(ctx, "p/")
	if err != nil || s.Versioning != providers.SettingUnknown || s.SoftDelete != providers.SettingUnknown ||
		s.ObjectLock != providers.SettingUnknown || s.Lifecycle != providers.SettingUnknown ||
		len(s.Notes) != 1 || s.Notes[0] != "the mem store reports no bucket settings" {
		t.Fatalf("a driver that reads none: %+v, %v", s, err)
	}
	if _, ok := providers.NewBucket(plain{mem.NewDriver()}).NoncurrentRule("p/", 1); ok {
		t.Error("a driver that reads none gave a rule")
	}

	// What a driver leaves zero is unknown.
	s, err = providers.NewBucket(inspector{Driver: mem.NewDriver(), s: driver.BucketSettings{Versioning: driver.SettingEnabled}}).BucketSettings(ctx, "p/")
	if err != nil || s.Versioning != providers.SettingEnabled || s.SoftDelete != providers.SettingUnknown || s.Lifecycle != providers.SettingUnknown {
		t.Fatalf("zero settings: %+v, %v", s, err)
	}

	// The mem store keeps nothing it overwrites, and has no rule to give.
	b := mem.New()
	if s, err := b.BucketSettings(ctx, "p/"); err != nil || s.Versioning != providers.SettingOff || s.SoftDelete != providers.SettingOff {
		t.Fatalf("mem: %+v, %v", s, err)
	}
	if _, ok := b.NoncurrentRule("p/", 1); ok {
		t.Error("mem gave a rule")
	}
	if r, ok := providers.NewBucket(inspector{Driver: mem.NewDriver()}).NoncurrentRule("p/", 1); !ok || r.Text != "p/" {
		t.Errorf("rule %+v, %v", r, ok)
	}
}

// TestBucketSettingsTimeout: the call is bounded by the request timeout,
// and its error names the operation and the prefix.
func TestBucketSettingsTimeout(t *testing.T) {
	b := providers.NewBucket(inspector{Driver: mem.NewDriver(), hang: true}).WithRequestTimeout(20 * time.Millisecond)
	_, err := b.BucketSettings(t.Context(), "p/")
	var pe *providers.Error
	var te *providers.TimeoutError
	if !errors.As(err, &pe) || pe.Op != "settings" || pe.Key != "p/" || !errors.As(err, &te) {
		t.Fatalf("%v, want a timeout naming settings and the prefix", err)
	}
}

// TestFaultyPassesSettingsOn: middleware passes the wrapped driver's
// settings and rule on.
func TestFaultyPassesSettingsOn(t *testing.T) {
	f, err := faulty.New(inspector{Driver: mem.NewDriver(), s: driver.BucketSettings{Versioning: driver.SettingSuspended}}, faulty.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := providers.NewBucket(f)
	if s, err := b.BucketSettings(t.Context(), "p/"); err != nil || s.Versioning != providers.SettingSuspended {
		t.Fatalf("%+v, %v", s, err)
	}
	if r, ok := b.NoncurrentRule("q/", 1); !ok || r.Text != "q/" {
		t.Fatalf("rule %+v, %v", r, ok)
	}
	f, err = faulty.New(plain{mem.NewDriver()}, faulty.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := providers.NewBucket(f).BucketSettings(t.Context(), "p/"); err != nil || s.Versioning != providers.SettingUnknown {
		t.Fatalf("over a driver that reads none: %+v, %v", s, err)
	}
}
