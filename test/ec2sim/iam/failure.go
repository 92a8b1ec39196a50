package iam

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// AuthorizationFailure is what an UnauthorizedOperation's encoded message
// holds, as sts:DecodeAuthorizationMessage shows it for EC2: the request
// IAM refused and why. ec2sim encodes it as base64 JSON, not encrypted.
type AuthorizationFailure struct {
	Allowed      bool   `json:"allowed"`
	ExplicitDeny bool   `json:"explicitDeny"`
	DeniedBy     string `json:"deniedBy,omitempty"`
	Principal    string `json:"principal"`
	Action       string `json:"action"`
	Resource     string `json:"resource"`
	// Conditions are the condition keys the policy asked for that the
	// request carried, with their values.
	Conditions map[string][]string `json:"conditions,omitempty"`
}

// Encode is the encoded message of an UnauthorizedOperation.
func (f AuthorizationFailure) Encode() string {
	b, _ := json.Marshal(f) // plain strings and maps always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeAuthorizationMessage reads the encoded message at the end of an
// UnauthorizedOperation's message (or the encoded message alone).
func DecodeAuthorizationMessage(message string) (AuthorizationFailure, error) {
	const marker = "Encoded authorization failure message: "
	if i := strings.LastIndex(message, marker); i >= 0 {
		message = message[i+len(marker):]
	}
	var f AuthorizationFailure
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(message))
	if err != nil {
		return f, err
	}
	return f, json.Unmarshal(b, &f)
}
