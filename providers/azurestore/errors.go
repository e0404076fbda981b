package azurestore

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// mapError is the one place where the store's answers become portable
// errors. The native error stays reachable with errors.As; its message,
// many lines with the reply body, is replaced by the status and code.
func (s *store) mapError(op, key string, err error) error {
	write := op == "create" || op == "replace" || op == "delete"
	// No token could be obtained (no credential configured, or the chain
	// failed): nothing was sent, so even a write's outcome is known.
	if errors.Is(err, providers.ErrNoCredentials) {
		return fmt.Errorf("%w: container %q", providers.ErrNoCredentials, s.container)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		switch {
		// No connection could be made (refused, DNS, TLS handshake):
		// nothing was sent, so even a write's outcome is known.
		case driver.ConnectFailed(err):
			return fmt.Errorf("%w: container %q: %w", providers.ErrUnreachable, s.container, err)
		// No answer: connection reset, reply lost, timeout, context
		// cancelled or past its deadline. The write may have landed.
		case write:
			return fmt.Errorf("%w: %w", providers.ErrUnknownOutcome, err)
		}
		return err
	}
	code := bloberror.Code(re.ErrorCode)
	native := driver.Native(fmt.Sprintf("%d %s", re.StatusCode, re.ErrorCode), err)
	var sentinel error
	switch {
	// Azure and Azurite: the container does not exist (any operation).
	case code == bloberror.ContainerNotFound:
		sentinel = fmt.Errorf("%w: %q", providers.ErrNoBucket, s.container)
	// Azure and Azurite: a wrong account key (the signature does not
	// match), an expired SAS, or a principal without the role.
	case code == bloberror.AuthenticationFailed, code == bloberror.AuthorizationFailure,
		code == bloberror.AuthorizationPermissionMismatch, code == bloberror.InsufficientAccountPermissions,
		re.StatusCode == http.StatusForbidden && code == "":
		sentinel = fmt.Errorf("%w for container %q", providers.ErrPermission, s.container)
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
		return native
	}
	return fmt.Errorf("%w: %w", sentinel, native)
}
