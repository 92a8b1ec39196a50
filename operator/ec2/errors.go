package ec2

import (
	"context"
	"errors"

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
	"InsufficientFreeAddressesInSubnet":  cloud.ErrSubnetFull,
	"InsufficientCidrBlocks":             cloud.ErrSubnetFull,
	"AttachmentLimitExceeded":            cloud.ErrENILimit,
	"PrivateIpAddressLimitExceeded":      cloud.ErrIPLimit,
	"RequestLimitExceeded":               cloud.ErrThrottled,
	"Throttling":                         cloud.ErrThrottled,
	"ThrottlingException":                cloud.ErrThrottled,
	"UnauthorizedOperation":              cloud.ErrUnauthorized,
	"AuthFailure":                        cloud.ErrUnauthorized,
	"InvalidNetworkInterface.InUse":      cloud.ErrInUse,
	"IncorrectState":                     cloud.ErrInUse,
	"InternalError":                      cloud.ErrUnavailable,
	"InternalFailure":                    cloud.ErrUnavailable,
	"ServiceUnavailable":                 cloud.ErrUnavailable,
	"Unavailable":                        cloud.ErrUnavailable,
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
	out := &cloud.Error{Action: action, Message: err.Error(), Kind: cloud.ErrUnavailable}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		out.RequestID = re.ServiceRequestID()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		out.Code, out.Message = api.ErrorCode(), api.ErrorMessage()
		kind, known := kinds[out.Code]
		switch {
		case known:
			out.Kind = kind
		case re != nil && re.HTTPStatusCode() >= 500:
			out.Kind = cloud.ErrUnavailable
		default:
			out.Kind = cloud.ErrInvalid
		}
	}
	// Anything without an API error (connection refused, timeout) is a
	// failure to reach EC2, which a later attempt may overcome.
	return out
}
