// Package metadata reads what enipam-agent needs of its instance's
// metadata (IMDSv2): the private addresses EC2 has on one of its ENIs,
// the documented confirmation that a reassigned address's remap is
// complete.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Reader reads the instance metadata of the instance it runs on.
type Reader struct {
	client *imds.Client
}

// New returns a reader of the metadata service at endpoint ("" for the
// SDK's default: AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254).
func New(endpoint string) *Reader {
	opts := imds.Options{}
	if endpoint != "" {
		opts.Endpoint = endpoint
	}
	return &Reader{client: imds.New(opts)}
}

// LocalIPv4s returns the private IPv4 addresses the metadata lists on the
// ENI with MAC mac (network/interfaces/macs/MAC/local-ipv4s): after
// AssignPrivateIpAddresses with AllowReassignment, an address is listed
// there once EC2 completed its remap onto that ENI. An ENI the metadata
// does not know (not attached yet, or gone) has none.
func (r *Reader) LocalIPv4s(ctx context.Context, mac string) ([]string, error) {
	mac = strings.ToLower(mac)
	out, err := r.client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "network/interfaces/macs/" + mac + "/local-ipv4s"})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("reading local-ipv4s of %s from the instance metadata, %w", mac, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return nil, fmt.Errorf("reading local-ipv4s of %s from the instance metadata, %w", mac, err)
	}
	return strings.Fields(string(b)), nil
}
