// Package wire is the emulated EC2 at its edge: what a client sends and
// receives. [EC2] serves the Query API over a state.State: it counts the
// call, authenticates its Signature Version 4 (auth.go), checks the API
// version, asks package behaviour whether to throttle, how long to wait
// and whether to fail it, decodes the form into the State's request
// (query.go, actions.go: an unknown parameter is UnknownParameter),
// authorizes it by the caller's IAM policy on every resource the action
// touches with the condition keys EC2 gives it (iam_request.go; the
// policy language is package iam), runs it, or its dry run, and writes
// EC2's XML answer or error (xmlwrite.go, xmlfast.go) with a request ID.
// [IMDS] serves IMDSv2 for one instance at a time: session tokens, then
// what the State says the instance's metadata is.
//
// IAM is evaluated here, at the edge, because what it needs is the
// request as sent (the form's tags, the IDs it names) and the caller's
// identity; what it needs of the resources (their tags, an attachment's
// parties, an Elastic IP's allocation) it asks the State.
package wire
