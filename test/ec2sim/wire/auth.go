package wire

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/enipam/enipam/test/ec2sim/iam"
	"github.com/enipam/enipam/test/ec2sim/state"
)

// Every EC2 request is authenticated as EC2 does it (Signature Version 4
// in the Authorization header, scoped to the scenario's region and the
// service ec2, dated within 15 minutes of the wall clock, by a principal
// of the scenario), names API version 2016-11-15, and is then authorized
// by the principal's IAM policy (package iam, iam_request.go). The signature is
// recomputed with aws-sdk-go-v2's own signer over the headers the client
// signed. The codes are EC2's: MissingParameter for an unsigned request
// (EC2 asks for AWSAccessKeyId), AuthFailure (401) for an unknown access
// key or a credential scoped to another region or service,
// SignatureDoesNotMatch (403), RequestExpired (400), MissingParameter or
// NoSuchVersion for the version, UnauthorizedOperation (403) with an
// encoded authorization failure message. Signature Version 2 and
// presigned URLs are not accepted.

// APIVersion is the only EC2 API version served.
const APIVersion = "2016-11-15"

// maxClockSkew is how far a request's date may be from the server's clock.
const maxClockSkew = 15 * time.Minute

const (
	sigV4Algorithm        = "AWS4-HMAC-SHA256"
	amzDateFormat         = "20060102T150405Z"
	codeAuthFailure       = "AuthFailure"
	codeSignatureMismatch = "SignatureDoesNotMatch"
	codeRequestExpired    = "RequestExpired"
	codeIncompleteSig     = "IncompleteSignature"
	codeUnauthorized      = "UnauthorizedOperation"
	codeNoSuchVersion     = "NoSuchVersion"
)

var errCredentials = state.Errorf(codeAuthFailure, "AWS was not able to validate the provided access credentials")

// authenticate checks the signature of r, whose body is body, and returns
// the principal that signed it.
func (s *EC2) authenticate(r *http.Request, body []byte) (*iam.Principal, *state.APIError) {
	header := r.Header.Get("Authorization")
	if header == "" {
		if r.Form.Get("X-Amz-Signature") != "" || r.Form.Get("Signature") != "" {
			return nil, state.Errorf(codeAuthFailure, "ec2sim accepts Signature Version 4 in the Authorization header only")
		}
		return nil, state.Errorf(state.CodeMissingParameter, "The request must contain the parameter AWSAccessKeyId")
	}
	algorithm, fields, _ := strings.Cut(header, " ")
	if algorithm != sigV4Algorithm {
		return nil, state.Errorf(codeIncompleteSig, "Unsupported AWS 'algorithm': '%s'", truncate(algorithm, 32))
	}
	parts := map[string]string{}
	for _, f := range strings.Split(fields, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		parts[k] = v
	}
	credential, signedHeaders, signature := parts["Credential"], parts["SignedHeaders"], parts["Signature"]
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || signedHeaders == "" || signature == "" || scope[4] != "aws4_request" {
		return nil, state.Errorf(codeIncompleteSig, "Authorization header requires 'Credential' (key/date/region/service/aws4_request), 'SignedHeaders' and 'Signature'")
	}
	keyID, day, region, service := scope[0], scope[1], scope[2], scope[3]
	p := s.principals[keyID]
	if p == nil || region != s.state.Region() || service != "ec2" {
		return nil, errCredentials
	}
	signed, err := signingTime(r)
	if err != nil {
		return nil, err
	}
	if now := s.wallClock(); signed.Before(now.Add(-maxClockSkew)) || signed.After(now.Add(maxClockSkew)) {
		return nil, state.Errorf(codeRequestExpired, "Request has expired.")
	}
	if day != signed.Format("20060102") {
		return nil, state.Errorf(codeSignatureMismatch, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s'", truncate(day, 16), signed.Format("20060102"))
	}
	want, err := resign(r, body, strings.Split(signedHeaders, ";"), aws.Credentials{AccessKeyID: keyID, SecretAccessKey: p.Secret}, region, signed)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return nil, state.Errorf(codeSignatureMismatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return p, nil
}

// signingTime reads X-Amz-Date, or Date.
func signingTime(r *http.Request) (time.Time, *state.APIError) {
	if v := r.Header.Get("X-Amz-Date"); v != "" {
		t, err := time.Parse(amzDateFormat, v)
		if err != nil {
			return time.Time{}, state.Errorf(codeIncompleteSig, "X-Amz-Date %q is not in the form 20060102T150405Z", truncate(v, 32))
		}
		return t, nil
	}
	if v := r.Header.Get("Date"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return time.Time{}, state.Errorf(codeIncompleteSig, "Date %q is not an HTTP date", truncate(v, 40))
		}
		return t, nil
	}
	return time.Time{}, state.Errorf(codeIncompleteSig, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
}

// resign signs a copy of r holding only the headers the client signed with
// the SDK's signer and returns the signature.
func resign(r *http.Request, body []byte, signedHeaders []string, creds aws.Credentials, region string, at time.Time) (string, *state.APIError) {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	cp, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return "", state.Errorf(codeIncompleteSig, "The request URL cannot be signed: %v", err)
	}
	cp.Host = r.Host
	hasHost := false
	for _, h := range signedHeaders {
		switch h {
		case "host":
			hasHost = true
		case "content-length":
			cp.ContentLength = r.ContentLength
		default:
			for _, v := range r.Header.Values(h) {
				cp.Header.Add(h, v)
			}
		}
	}
	if !hasHost {
		return "", state.Errorf(codeIncompleteSig, "'Host' must be a signed header")
	}
	if creds.SessionToken = cp.Header.Get("X-Amz-Security-Token"); creds.SessionToken != "" {
		return "", errCredentials // no principal has a session token
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, cp, hex.EncodeToString(sum[:]), "ec2", region, at); err != nil {
		return "", state.Errorf(codeIncompleteSig, "The request cannot be signed: %v", err)
	}
	_, sig, _ := strings.Cut(cp.Header.Get("Authorization"), "Signature=")
	return sig, nil
}

// checkVersion answers a request without Version, or for another API
// version, as EC2 does.
func checkVersion(form url.Values) *state.APIError {
	switch v := form.Get("Version"); v {
	case APIVersion:
		return nil
	case "":
		return state.Errorf(state.CodeMissingParameter, "The request must contain the parameter Version")
	default:
		return state.Errorf(codeNoSuchVersion, "The requested version (%s) of service AmazonEC2 does not exist", truncate(v, 32))
	}
}

// authorize evaluates the principal's policy for action with the form v:
// nil when every resource the action touches is allowed, else
// UnauthorizedOperation (or the NotFound of a resource it names).
func authorize(s *state.State, p *iam.Principal, action string, v url.Values) error {
	if p == nil || p.Policy == nil {
		return nil
	}
	reqs, err := authzRequests(s, action, v)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		asked := map[string][]string{}
		keys := r.Keys
		r.Keys = func(key string) ([]string, bool, error) {
			vals, present, err := keys(key)
			if present {
				asked[key] = vals
			}
			return vals, present, err
		}
		d, err := p.Policy.Evaluate(r)
		if err != nil {
			return err
		}
		if d.Allowed && !d.Explicit {
			continue
		}
		why := "because no identity-based policy allows the " + r.Action + " action"
		if d.Explicit {
			why = "with an explicit deny in an identity-based policy"
		}
		failure := iam.AuthorizationFailure{Allowed: false, ExplicitDeny: d.Explicit, DeniedBy: d.DeniedBy,
			Principal: p.ARN, Action: r.Action, Resource: r.Resource, Conditions: asked}
		return state.Errorf(codeUnauthorized, "You are not authorized to perform this operation. User: %s is not authorized to perform: %s on resource: %s %s. Encoded authorization failure message: %s",
			p.ARN, r.Action, r.Resource, why, failure.Encode())
	}
	return nil
}
