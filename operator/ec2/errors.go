package ec2

import (
	"context"
	"errors"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/enipam/enipam/operator/cloud"
)

// kinds maps EC2's error codes onto the cloud sentinels: the one place
// where codes are interpreted.
var kinds = map[string]error{
	"InvalidNetworkInterfaceID.NotFound": cloud.ErrNotFound,
	"InvalidInstanceID.NotFound":         cloud.ErrNotFound,
	"InvalidSubnetID.NotFound":           cloud.ErrNotFound,
	"InvalidAttachmentID.NotFound":       cloud.ErrNotFound,
	"InvalidGroup.NotFound":              cloud.ErrNotFound,
	"InvalidVpcID.NotFound":              cloud.ErrNotFound,
	"InvalidAllocationID.NotFound":       cloud.ErrNotFound,
	"InvalidAssociationID.NotFound":      cloud.ErrNotFound,
	"InvalidAddress.NotFound":            cloud.ErrNotFound,
	"Resource.AlreadyAssociated":         cloud.ErrInUse,
	"InvalidIPAddress.InUse":             cloud.ErrInUse,
	"AddressLimitExceeded":               cloud.ErrAddressLimit,
	"InsufficientFreeAddressesInSubnet":  cloud.ErrSubnetFull,
	"InsufficientCidrBlocks":             cloud.ErrNoPrefixRoom,
	"AttachmentLimitExceeded":            cloud.ErrENILimit,
	"PrivateIpAddressLimitExceeded":      cloud.ErrIPLimit,
	"RequestLimitExceeded":               cloud.ErrThrottled,
	"Throttling":                         cloud.ErrThrottled,
	"ThrottlingException":                cloud.ErrThrottled,
	"UnauthorizedOperation":              cloud.ErrUnauthorized,
	"AuthFailure":                        cloud.ErrUnauthorized,
	"InvalidNetworkInterface.InUse":      cloud.ErrInUse,
	"PrivateIpAddressInUse":              cloud.ErrInUse,
	"IncorrectState":                     cloud.ErrInUse,
	"InternalError":                      cloud.ErrUnavailable,
	"InternalFailure":                    cloud.ErrUnavailable,
	"ServiceUnavailable":                 cloud.ErrUnavailable,
	"Unavailable":                        cloud.ErrUnavailable,
}

// subnetFullMessage is how EC2 words a full subnet inside an
// InvalidParameterValue (Cilium matches the same text: pkg/aws/api SubnetFullErrMsgStr).
const subnetFullMessage = "There aren't sufficient free Ipv4 addresses or prefixes"

// Kind maps an EC2 error code and message, and the HTTP status of the
// answer (0 when unknown), onto one of the cloud sentinels. It is the one
// place where EC2's codes are interpreted; in-process fakes of the cloud
// use it too.
func Kind(code, message string, status int) error {
	if kind, known := kinds[code]; known {
		return kind
	}
	switch {
	case code == "InvalidParameterValue" && strings.Contains(message, subnetFullMessage):
		return cloud.ErrSubnetFull
	case status >= 500:
		return cloud.ErrUnavailable
	}
	return cloud.ErrInvalid
}

// classify turns an SDK error into a *cloud.Error; context errors pass
// through unchanged so callers see cancellation as such.
func classify(action string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	// The SDK wraps every error of a call in an OperationError; what has
	// neither that nor an API error did not come from EC2 (an in-memory
	// EC2's injected failure, a process dying in a test) and is the
	// caller's own.
	var op *smithy.OperationError
	var api smithy.APIError
	if !errors.As(err, &op) && !errors.As(err, &api) {
		return err
	}
	out := &cloud.Error{Action: action, Message: err.Error(), Kind: cloud.ErrUnavailable}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		out.RequestID = re.ServiceRequestID()
	}
	if errors.As(err, &api) {
		out.Code, out.Message = api.ErrorCode(), api.ErrorMessage()
		status := 0
		if re != nil {
			status = re.HTTPStatusCode()
		}
		out.Kind = Kind(out.Code, out.Message, status)
	}
	// Anything without an API error (connection refused, timeout) is a
	// failure to reach EC2, which a later attempt may overcome.
	return out
}
