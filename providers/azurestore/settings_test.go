package azurestore

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
)

// TestBucketSettings: versioning is unknown until a write's reply says
// (x-ms-version-id), then what the last one said; the container's
// properties say whether an immutability policy or a legal hold applies;
// soft delete and lifecycle, the account's, stay unknown.
func TestBucketSettings(t *testing.T) {
	versionID := ""
	s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Date", dateHeader)
		switch {
		case r.Method == http.MethodPut:
			io.Copy(io.Discard, r.Body)
			h.Set("ETag", newETag)
			h.Set("Last-Modified", lastModified)
			if versionID != "" {
				h.Set("x-ms-version-id", versionID)
			}
			w.WriteHeader(http.StatusCreated)
		case r.URL.Query().Get("restype") == "container":
			h.Set("ETag", newETag)
			h.Set("Last-Modified", lastModified)
			h.Set("x-ms-has-immutability-policy", "true")
			h.Set("x-ms-has-legal-hold", "false")
			w.WriteHeader(http.StatusOK)
		default:
			azureError(w, r, 400, "Unexpected")
		}
	})
	ctx := t.Context()
	read := func() providers.BucketSettings {
		t.Helper()
		got, err := s.BucketSettings(ctx, "leases/")
		if err != nil {
			t.Fatal(err)
		}
		if got.SoftDelete != providers.SettingUnknown || got.Lifecycle != providers.SettingUnknown ||
			got.ObjectLock != providers.SettingEnabled || got.ObjectLockDetail != "container immutability policy" {
			t.Fatalf("%+v", got)
		}
		return got
	}
	if got := read(); got.Versioning != providers.SettingUnknown || !strings.Contains(got.Notes[0], "isVersioningEnabled") {
		t.Fatalf("before a write: %+v", got)
	}
	if _, err := s.Create(ctx, "leases/a", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Versioning != providers.SettingOff {
		t.Fatalf("after a reply without a version id: %+v", got)
	}
	versionID = "2026-11-29T10:00:01.0000000Z"
	if _, err := s.Replace(ctx, "leases/a", []byte("y"), nil, strings.Trim(newETag, `"`)); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Versioning != providers.SettingEnabled {
		t.Fatalf("after a reply with a version id: %+v", got)
	}
}

func TestBucketSettingsNoContainer(t *testing.T) {
	s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) { azureError(w, r, 404, "ContainerNotFound") })
	if _, err := s.BucketSettings(t.Context(), "leases/"); !errors.Is(err, providers.ErrNoBucket) {
		t.Fatalf("%v, want ErrNoBucket", err)
	}
}

// TestNoncurrentRule: the rule is a lifecycle management policy whose
// prefix starts with the container, as Azure's filters do.
func TestNoncurrentRule(t *testing.T) {
	s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {})
	rule, ok := s.NoncurrentRule("leases/", 1)
	var policy struct {
		Rules []struct {
			Enabled    bool
			Type       string
			Definition struct {
				Actions map[string]struct {
					Delete map[string]int
				}
				Filters struct {
					BlobTypes   []string
					PrefixMatch []string
				}
			}
		}
	}
	if !ok || json.Unmarshal([]byte(rule.Text), &policy) != nil || len(policy.Rules) != 1 {
		t.Fatalf("%+v", rule)
	}
	r := policy.Rules[0]
	if !r.Enabled || r.Type != "Lifecycle" || r.Definition.Actions["version"].Delete["daysAfterCreationGreaterThan"] != 1 ||
		r.Definition.Actions["snapshot"].Delete["daysAfterCreationGreaterThan"] != 1 ||
		len(r.Definition.Filters.PrefixMatch) != 1 || r.Definition.Filters.PrefixMatch[0] != testContainer+"/leases/" {
		t.Fatalf("%s", rule.Text)
	}
}
