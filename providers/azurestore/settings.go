package azurestore

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/objlease/objlease/providers/driver"
)

var _ driver.BucketInspector = (*store)(nil)

// Versioning as the replies to this store's writes showed it.
const (
	versioningUnseen int32 = iota // no write has succeeded yet
	versioningOff                 // a write's reply carried no x-ms-version-id
	versioningOn                  // a write's reply carried one
)

// BucketSettings reports what a container client can know. Blob
// versioning, blob soft delete and lifecycle management are settings of
// the storage account, read through Azure Resource Manager, not through
// the container: versioning is known from the replies to this store's
// writes (a Put Blob reply carries x-ms-version-id exactly when versioning
// is on), and soft delete and lifecycle stay unknown, with a note saying
// how to read them. The container's properties (one request) say whether
// an immutability policy or a legal hold applies (ObjectLock).
func (s *store) BucketSettings(ctx context.Context, prefix string) (driver.BucketSettings, error) {
	bs := driver.BucketSettings{SoftDelete: driver.SettingUnknown, Lifecycle: driver.SettingUnknown}
	switch s.versioning.Load() {
	case versioningOn:
		bs.Versioning = driver.SettingEnabled
	case versioningOff:
		bs.Versioning = driver.SettingOff
	default:
		bs.Versioning = driver.SettingUnknown
		bs.Notes = append(bs.Notes, "versioning: no write through this store yet, whose reply would say; "+
			"read it with az storage account blob-service-properties show --account-name ACCOUNT --query isVersioningEnabled")
	}
	bs.Notes = append(bs.Notes,
		"soft delete: a setting of the storage account a container client cannot read; "+
			"az storage account blob-service-properties show --account-name ACCOUNT --query deleteRetentionPolicy",
		"lifecycle: the storage account's management policy, which a container client cannot read; "+
			"az storage account management-policy show --account-name ACCOUNT --resource-group GROUP")
	p, err := s.client.GetProperties(ctx, nil)
	if err != nil {
		return bs, s.mapError("settings", prefix, err)
	}
	var lock []string
	if deref(p.HasImmutabilityPolicy) {
		lock = append(lock, "container immutability policy")
	}
	if deref(p.HasLegalHold) {
		lock = append(lock, "legal hold")
	}
	if deref(p.IsImmutableStorageWithVersioningEnabled) {
		lock = append(lock, "version-level immutability enabled")
	}
	bs.ObjectLock = driver.SettingOff
	if len(lock) > 0 {
		bs.ObjectLock, bs.ObjectLockDetail = driver.SettingEnabled, strings.Join(lock, "; ")
	}
	return bs, nil
}

// NoncurrentRule is an Azure lifecycle management policy (the JSON that az
// storage account management-policy create takes) with one rule: delete
// previous versions, and snapshots, of block blobs under the container's
// prefix days days after they were created.
func (s *store) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	type age struct {
		Days int `json:"daysAfterCreationGreaterThan"`
	}
	type del struct {
		Delete age `json:"delete"`
	}
	type rule struct {
		Enabled    bool   `json:"enabled"`
		Name       string `json:"name"`
		Type       string `json:"type"`
		Definition struct {
			Actions struct {
				Version  del `json:"version"`
				Snapshot del `json:"snapshot"`
			} `json:"actions"`
			Filters struct {
				BlobTypes   []string `json:"blobTypes"`
				PrefixMatch []string `json:"prefixMatch"`
			} `json:"filters"`
		} `json:"definition"`
	}
	r := rule{Enabled: true, Name: "objlease-noncurrent", Type: "Lifecycle"}
	r.Definition.Actions.Version.Delete.Days = max(days, 1)
	r.Definition.Actions.Snapshot.Delete.Days = max(days, 1)
	r.Definition.Filters.BlobTypes = []string{"blockBlob"}
	r.Definition.Filters.PrefixMatch = []string{s.container + "/" + prefix}
	text, _ := json.MarshalIndent(struct {
		Rules []rule `json:"rules"`
	}{[]rule{r}}, "", "  ")
	return driver.LifecycleRule{
		Format: "Azure lifecycle management policy (JSON)",
		Text:   string(text),
		Apply:  "az storage account management-policy create --account-name ACCOUNT --resource-group GROUP --policy @lifecycle.json",
		Note: "it replaces the account's whole policy: add the rule to the rules az storage account management-policy show lists, if there are any. " +
			"With blob soft delete on, what the rule deletes is kept for the soft delete retention, and with versioning off every overwritten blob is kept as a soft-deleted snapshot whatever the policy: " +
			"keep leases in an account without it (az storage account blob-service-properties update --enable-delete-retention false) or count it in",
	}
}
