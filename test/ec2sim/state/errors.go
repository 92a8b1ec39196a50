package state

import (
	"errors"
	"fmt"
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
	return &APIError{Code: code, Message: message, HTTPStatus: StatusForCode(code)}
}

// Errorf builds an *APIError with the status EC2 uses for code.
func Errorf(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), HTTPStatus: StatusForCode(code)}
}

// StatusForCode is the HTTP status real EC2 answers a code with: client
// errors are 400 unless listed.
func StatusForCode(code string) int {
	switch code {
	case CodeRequestLimitExceeded, "Unavailable", "ServiceUnavailable":
		return 503 // Service Unavailable
	case "InternalError", "InternalFailure":
		return 500 // Internal Server Error
	case "UnauthorizedOperation", "SignatureDoesNotMatch", "Blocked":
		return 403 // Forbidden
	case "AuthFailure":
		return 401 // Unauthorized
	case CodeDryRunOperation:
		return 412 // Precondition Failed
	default:
		return 400 // Bad Request
	}
}

// EC2 error codes the emulator answers with. Clients match on these strings,
// so they are spelled exactly as EC2 spells them.
const (
	CodeRequestLimitExceeded    = "RequestLimitExceeded"
	CodeDryRunOperation         = "DryRunOperation"
	CodeMissingParameter        = "MissingParameter"
	CodeInvalidParameterValue   = "InvalidParameterValue"
	CodeInvalidParameterCombo   = "InvalidParameterCombination"
	CodeUnknownParameter        = "UnknownParameter"
	CodeInvalidAction           = "InvalidAction"
	CodeMissingAction           = "MissingAction"
	CodeInvalidPaginationToken  = "InvalidPaginationToken"
	CodeIncorrectState          = "IncorrectState"
	CodeIncorrectInstanceState  = "IncorrectInstanceState"
	CodeOperationNotPermitted   = "OperationNotPermitted"
	CodeIdempotentMismatch      = "IdempotentParameterMismatch"
	CodeENINotFound             = "InvalidNetworkInterfaceID.NotFound"
	CodeENIMalformed            = "InvalidNetworkInterfaceID.Malformed"
	CodeENIInUse                = "InvalidNetworkInterface.InUse"
	CodeInstanceNotFound        = "InvalidInstanceID.NotFound"
	CodeInstanceMalformed       = "InvalidInstanceID.Malformed"
	CodeSubnetNotFound          = "InvalidSubnetID.NotFound"
	CodeSubnetMalformed         = "InvalidSubnetID.Malformed"
	CodeVpcNotFound             = "InvalidVpcID.NotFound"
	CodeVpcMalformed            = "InvalidVpcID.Malformed"
	CodeGroupNotFound           = "InvalidGroup.NotFound"
	CodeGroupMalformed          = "InvalidGroupId.Malformed"
	CodeRouteTableNotFound      = "InvalidRouteTableID.NotFound"
	CodeAttachmentNotFound      = "InvalidAttachmentID.NotFound"
	CodeAllocationNotFound      = "InvalidAllocationID.NotFound"
	CodeAssociationNotFound     = "InvalidAssociationID.NotFound"
	CodeAddressNotFound         = "InvalidAddress.NotFound"
	CodeAddressInUse            = "InvalidIPAddress.InUse"
	CodeAlreadyAssociated       = "Resource.AlreadyAssociated"
	CodeAddressLimitExceeded    = "AddressLimitExceeded"
	CodeInvalidInstanceType     = "InvalidInstanceType"
	CodeInvalidID               = "InvalidID"
	CodeInsufficientAddresses   = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks  = "InsufficientCidrBlocks"
	CodeAttachmentLimitExceeded = "AttachmentLimitExceeded"
	CodePrivateIPLimitExceeded  = "PrivateIpAddressLimitExceeded"
	CodePrivateIPInUse          = "PrivateIpAddressInUse"
	CodeTagLimitExceeded        = "TagLimitExceeded"
)
