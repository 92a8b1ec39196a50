package ec2

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/enipam/enipam/operator/cloud"
)

// TestClassifyReadsOnlyWhatCameThroughTheSDK: an API error inside the
// SDK's OperationError becomes a *cloud.Error with its code's sentinel
// (the HTTP status decides for an unknown code); a failure to reach EC2
// inside an OperationError is ErrUnavailable; cancellation and an error
// that never went through the SDK (a test's injected crash) reach the
// caller unchanged.
func TestClassifyReadsOnlyWhatCameThroughTheSDK(t *testing.T) {
	answer := func(code string, status int) error {
		return &smithy.OperationError{ServiceID: "EC2", OperationName: "AssignPrivateIpAddresses", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      &smithy.GenericAPIError{Code: code, Message: code + " said EC2"},
			},
			RequestID: "req-1",
		}}
	}
	crash := errors.New("operator died")
	for _, tc := range []struct {
		name      string
		err       error
		kind      error // nil: the error comes back unchanged
		code, req string
	}{
		{"throttled", answer("RequestLimitExceeded", 503), cloud.ErrThrottled, "RequestLimitExceeded", "req-1"},
		{"unknown code, server side", answer("SomethingNew", 500), cloud.ErrUnavailable, "SomethingNew", "req-1"},
		{"unknown code, client side", answer("SomethingNew", 400), cloud.ErrInvalid, "SomethingNew", "req-1"},
		{"connection refused", &smithy.OperationError{ServiceID: "EC2", OperationName: "AssignPrivateIpAddresses", Err: syscall.ECONNREFUSED}, cloud.ErrUnavailable, "", ""},
		{"canceled", &smithy.OperationError{Err: context.Canceled}, nil, "", ""},
		{"not from the SDK", crash, nil, "", ""},
	} {
		got := classify(string(AssignPrivateIpAddresses), tc.err)
		var ce *cloud.Error
		switch {
		case tc.kind == nil && got != tc.err:
			t.Errorf("%s: got %v, want the error unchanged", tc.name, got)
		case tc.kind == nil:
		case !errors.As(got, &ce) || !errors.Is(got, tc.kind) || ce.Code != tc.code || ce.RequestID != tc.req || ce.Action != "AssignPrivateIpAddresses":
			t.Errorf("%s: got %#v, want kind %v, code %q, request %q", tc.name, got, tc.kind, tc.code, tc.req)
		}
	}
}
