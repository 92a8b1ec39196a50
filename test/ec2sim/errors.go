package ec2sim

import (
	"errors"
	"fmt"
	"net/http"
)

// APIError is an EC2 error as the wire carries it: a code clients switch on,
// a human message and the HTTP status it is sent with. Every error the engine
// returns is an *APIError; anything else reaching the HTTP layer is a bug and
// is answered as InternalError.
type APIError struct {
	Code       string
	Message    string
	HTTPStatus int
}

// Error implements error as "Code: Message".
func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Is reports whether target is an *APIError with the same code, so that
// errors.Is(err, &APIError{Code: "IncorrectState"}) works.
func (e *APIError) Is(target error) bool {
	var t *APIError
	return errors.As(target, &t) && t.Code == e.Code
}

// NewAPIError returns the error EC2 answers with code: message as given,
// HTTP status as EC2 sends it for code. Fakes built on the State use it to
// inject failures that look like EC2's.
func NewAPIError(code, message string) *APIError {
	return &APIError{Code: code, Message: message, HTTPStatus: statusForCode(code)}
}

// apiErr builds an *APIError with the status EC2 uses for code.
func apiErr(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), HTTPStatus: statusForCode(code)}
}

// statusForCode is the HTTP status real EC2 answers a code with: client
// errors are 400 unless listed.
func statusForCode(code string) int {
	switch code {
	case codeRequestLimitExceeded, "Unavailable", "ServiceUnavailable":
		return http.StatusServiceUnavailable
	case "InternalError", "InternalFailure":
		return http.StatusInternalServerError
	case "UnauthorizedOperation", "SignatureDoesNotMatch", "Blocked":
		return http.StatusForbidden
	case "AuthFailure":
		return http.StatusUnauthorized
	case codeDryRunOperation:
		return http.StatusPreconditionFailed
	default:
		return http.StatusBadRequest
	}
}

// EC2 error codes the emulator answers with. Clients match on these strings,
// so they are spelled exactly as EC2 spells them.
const (
	codeRequestLimitExceeded    = "RequestLimitExceeded"
	codeDryRunOperation         = "DryRunOperation"
	codeMissingParameter        = "MissingParameter"
	codeInvalidParameterValue   = "InvalidParameterValue"
	codeInvalidParameterCombo   = "InvalidParameterCombination"
	codeUnknownParameter        = "UnknownParameter"
	codeInvalidAction           = "InvalidAction"
	codeMissingAction           = "MissingAction"
	codeInvalidPaginationToken  = "InvalidPaginationToken"
	codeIncorrectState          = "IncorrectState"
	codeIncorrectInstanceState  = "IncorrectInstanceState"
	codeOperationNotPermitted   = "OperationNotPermitted"
	codeIdempotentMismatch      = "IdempotentParameterMismatch"
	codeENINotFound             = "InvalidNetworkInterfaceID.NotFound"
	codeENIMalformed            = "InvalidNetworkInterfaceID.Malformed"
	codeENIInUse                = "InvalidNetworkInterface.InUse"
	codeInstanceNotFound        = "InvalidInstanceID.NotFound"
	codeInstanceMalformed       = "InvalidInstanceID.Malformed"
	codeSubnetNotFound          = "InvalidSubnetID.NotFound"
	codeSubnetMalformed         = "InvalidSubnetID.Malformed"
	codeVpcNotFound             = "InvalidVpcID.NotFound"
	codeVpcMalformed            = "InvalidVpcID.Malformed"
	codeGroupNotFound           = "InvalidGroup.NotFound"
	codeGroupMalformed          = "InvalidGroupId.Malformed"
	codeRouteTableNotFound      = "InvalidRouteTableID.NotFound"
	codeAttachmentNotFound      = "InvalidAttachmentID.NotFound"
	codeAllocationNotFound      = "InvalidAllocationID.NotFound"
	codeAssociationNotFound     = "InvalidAssociationID.NotFound"
	codeAddressNotFound         = "InvalidAddress.NotFound"
	codeAddressInUse            = "InvalidIPAddress.InUse"
	codeAlreadyAssociated       = "Resource.AlreadyAssociated"
	codeAddressLimitExceeded    = "AddressLimitExceeded"
	codeInvalidInstanceType     = "InvalidInstanceType"
	codeInvalidID               = "InvalidID"
	codeInsufficientAddresses   = "InsufficientFreeAddressesInSubnet"
	codeInsufficientCidrBlocks  = "InsufficientCidrBlocks"
	codeAttachmentLimitExceeded = "AttachmentLimitExceeded"
	codePrivateIPLimitExceeded  = "PrivateIpAddressLimitExceeded"
	codePrivateIPInUse          = "PrivateIpAddressInUse"
	codeTagLimitExceeded        = "TagLimitExceeded"
)
