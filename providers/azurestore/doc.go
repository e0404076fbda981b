// Package azurestore stores lease records as block blobs in an Azure Blob Storage
// container.
//
// # Constructing
//
// Build a container client the way your deployment needs (credentials,
// transport, retry options) and wrap it:
//
//	client, err := container.NewClientFromConnectionString(connStr, "leases", nil)
//	...
//	store := azurestore.New(client)
//
// Or open a URL; importing this package registers the "azblob" scheme with
// providers.Open:
//
//	azblob://CONTAINER/KEY/PATH[?account=NAME][&endpoint=URL]
//
// The account is chosen in this order:
//
//   - ?account=NAME or ?endpoint=URL: azidentity.NewDefaultAzureCredential
//     (environment, workload identity, managed identity, Azure CLI, ...)
//     against ?endpoint, or https://NAME.blob.core.windows.net when only the
//     account is given.
//   - AZURE_STORAGE_CONNECTION_STRING: the account, key and endpoint in the
//     connection string (this is how Azurite is reached).
//   - AZURE_STORAGE_ACCOUNT=NAME: as ?account=NAME.
//
// OpenURL does the same and lets the caller pass client options, for example
// a custom transport.
//
// # Writes and retries
//
// Create is a block-blob Put with If-None-Match: *, Replace a Put with
// If-Match: VERSION and Delete a Delete with If-Match: VERSION. The version is
// the blob's ETag without its quotes (listings give ETags unquoted, headers
// quoted), which changes on every write (Properties.VersionsRepeat is false).
// Native blob leases are not used.
//
// The SDK's own retries are switched off for these three calls, per call
// (policy.WithRetryOptions with MaxRetries -1), whatever the client was built
// with; that per-call setting replaces the client's retry options for the
// write, including TryTimeout. The reason: when a conditional write's reply is
// lost and the SDK retries it, the retry meets the blob the first attempt
// already wrote and comes back as "already exists" or "condition not met",
// although the write succeeded. Returning ErrUnknownOutcome instead lets the
// lease protocol settle the question by re-reading its nonce. Reads (Get,
// Stat, List) keep the client's retry policy.
//
// # Store answers and portable errors
//
// Every failure is returned as a *providers.Error naming the operation and the
// key; the SDK's *azcore.ResponseError (or transport error) stays reachable
// with errors.As. The SDK's message for a refusal spans many lines and
// carries the reply body; messages here say only its status and code. The
// mapping lives in one place, store.mapError:
//
//	answer                                          operation    portable error
//	409 BlobAlreadyExists                           create       ErrPrecondition
//	412 ConditionNotMet                             any write    ErrPrecondition
//	404 BlobNotFound                                replace/del  ErrPrecondition (Azure, If-Match on a missing blob)
//	404 BlobNotFound (or a HEAD 404 without a code) get/stat     ErrNotFound
//	404 ContainerNotFound                           any          ErrNoBucket, naming the container
//	403 AuthenticationFailed, Authorization*        any          ErrPermission, naming the container
//	400 InvalidResourceName, InvalidUri             any          ErrInvalidKey
//	429 (any code), 503 ServerBusy                  any          ErrThrottled
//	other 5xx                                       any write    ErrUnknownOutcome
//	no connection (refused, DNS, TLS handshake)     any          ErrUnreachable, naming the container
//	no answer (reset, timeout, context ended)       any write    ErrUnknownOutcome
//	anything else, e.g. 409/412 Lease*              any          the native error only
//
// A blob held by a native Azure lease refuses our writes with a Lease* code
// (409 or 412; Azurite: 412 LeaseIdMissing); that is not a version mismatch,
// so it is not reported as ErrPrecondition. Azure has no answer that means
// ErrConflict: the losers of racing conditional writes get 412 or 409
// BlobAlreadyExists. Local checks refuse, before any request, an invalid key
// (ErrInvalidKey: the Bucket's portable rules, over 1024 bytes, and, in
// CheckKey, an empty path segment or one ending in '.', which Azure advises
// against) and an empty or "*" version (ErrPrecondition: it would make
// If-Match match anything).
//
// # Metadata
//
// Azure metadata names must be C# identifiers, so the '-' of portable keys is
// stored as '_' and turned back into '-' on read; keys are handed back lower
// case (Azure and Azurite may change their case). A key must be lower-case
// ASCII letters, digits and '-', and must not start with a digit. Values must
// be printable ASCII. Metadata that breaks these rules is refused before any
// request, with an error naming the object and the metadata key (no portable
// sentinel fits).
//
// # Timestamps
//
// Attrs.LastModified and WriteResult.LastModified are the blob's Last-Modified,
// which has one-second resolution. StoreTime is the Date header of the
// response. Delete reports neither, and List reports StoreTime as the Date of
// the listing response.
package azurestore
