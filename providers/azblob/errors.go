package azblob

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/objlease/objlease/providers"
)

// mapError is the one place where the store's answers become portable
// errors. The native error stays reachable with errors.As.
func (s *Store) mapError(op, key string, err error) error {
	write := op == "create" || op == "replace" || op == "delete"
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if write {
			// No answer: connection refused or reset, reply lost, timeout,
			// context cancelled or past its deadline. The write may have landed.
			return providers.Wrap(op, key, providers.ErrUnknownOutcome, err)
		}
		return providers.Wrap(op, key, err, nil)
	}
	code := bloberror.Code(re.ErrorCode)
	var sentinel error
	switch {
	// Azure and Azurite: the container does not exist (any operation).
	case code == bloberror.ContainerNotFound:
		sentinel = fmt.Errorf("%w: container %q does not exist", providers.ErrInvalidKey, s.container)
	// Azure and Azurite answer If-None-Match: * on an existing blob with 409
	// BlobAlreadyExists, not 412.
	case op == "create" && code == bloberror.BlobAlreadyExists:
		sentinel = providers.ErrPrecondition
	// Azure and Azurite: stale If-Match; Azurite also for If-Match on a
	// missing blob. Other 412 codes (LeaseIdMismatch..., LeaseLost) are about
	// native leases, not versions, and fall through.
	case write && re.StatusCode == http.StatusPreconditionFailed && code == bloberror.ConditionNotMet:
		sentinel = providers.ErrPrecondition
	// Azure: If-Match on a missing blob is 404 BlobNotFound.
	case (op == "replace" || op == "delete") && code == bloberror.BlobNotFound:
		sentinel = providers.ErrPrecondition
	// Azure and Azurite: GET or HEAD of a missing blob (a HEAD 404 carries
	// its code only in x-ms-error-code; an empty code is still a 404).
	case !write && re.StatusCode == http.StatusNotFound:
		sentinel = providers.ErrNotFound
	// Azure: blob names it cannot store (too long, bad characters).
	case code == bloberror.InvalidResourceName || code == bloberror.InvalidURI:
		sentinel = providers.ErrInvalidKey
	// Azure throttles with 503 ServerBusy (account or partition limits);
	// 429 is what gateways in front of it send. Nothing was written.
	case re.StatusCode == http.StatusTooManyRequests,
		re.StatusCode == http.StatusServiceUnavailable && code == bloberror.ServerBusy:
		sentinel = providers.ErrThrottled
	// Azure: 500 InternalError / OperationTimedOut, 502, other 503s. The
	// write may have been applied before the failure.
	case write && re.StatusCode >= 500:
		sentinel = providers.ErrUnknownOutcome
	// Anything else is a definite refusal with no portable meaning, e.g. 409
	// LeaseIdMissing or 412 LeaseIdMismatchWithBlobOperation on a blob held
	// by a native lease, or 403 AuthorizationFailure.
	default:
		return providers.Wrap(op, key, err, nil)
	}
	return providers.Wrap(op, key, sentinel, err)
}
