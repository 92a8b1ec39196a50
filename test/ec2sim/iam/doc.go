// Package iam is the IAM the emulated EC2 holds its callers to: identity
// policies parsed and evaluated as IAM does for one request at a time
// (an explicit Deny wins, else an Allow is needed), the scenario's
// principals with their access keys and policies (the repository's
// policy for enipam-operator by default), and the encoded authorization
// failure an UnauthorizedOperation carries. It knows neither EC2's model
// nor HTTP: package wire builds the requests each action makes and asks
// for a decision.
package iam
