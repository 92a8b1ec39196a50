package bench

import "context"

type stub struct{ name string }

func (s stub) Name() string { return s.name }
func (s stub) Run(context.Context, *Env) (*Report, error) { return &Report{Scenario: s.name}, nil }

// DefaultChurn is temporary.
func DefaultChurn(bool) stub { return stub{"churn"} }

// DefaultSteady is temporary.
func DefaultSteady(bool) stub { return stub{"steady"} }
