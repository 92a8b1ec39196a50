package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/state"
	"github.com/enipam/enipam/test/ec2sim/wire"
)

// Client is a typed client of an ec2sim.Sim's admin API. Errors the API answers
// come back as *APIError with the HTTP status.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient talks to the admin API at base (Endpoints.Admin); hc nil
// means http.DefaultClient.
func NewClient(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(base, "/"), hc: hc}
}

// AddInstance launches an instance (a node joins) and returns its summary.
func (c *Client) AddInstance(ctx context.Context, req state.LaunchRequest) (state.InstanceInfo, error) {
	var out state.InstanceInfo
	err := c.do(ctx, http.MethodPost, "/admin/instances", req, &out)
	return out, err
}

// TerminateInstance terminates an instance (through shutting-down with a
// TerminateDelay): DeleteOnTermination ENIs are deleted, others left
// available.
func (c *Client) TerminateInstance(ctx context.Context, instanceID string) error {
	return c.do(ctx, http.MethodDelete, "/admin/instances/"+url.PathEscape(instanceID), nil, nil)
}

// StopInstance stops an instance (through stopping with a StopDelay); its
// ENIs stay attached.
func (c *Client) StopInstance(ctx context.Context, instanceID string) error {
	return c.do(ctx, http.MethodPost, "/admin/instances/"+url.PathEscape(instanceID)+"/stop", nil, nil)
}

// IMDSEndpoint returns the base URL of the IMDS of one instance.
func (c *Client) IMDSEndpoint(ctx context.Context, instanceID string) (string, error) {
	var out struct {
		Endpoint string `json:"endpoint"`
	}
	err := c.do(ctx, http.MethodGet, "/admin/instances/"+url.PathEscape(instanceID)+"/imds", nil, &out)
	return out.Endpoint, err
}

// Counters reads the call counters.
func (c *Client) Counters(ctx context.Context) (wire.Counters, error) {
	var out wire.Counters
	err := c.do(ctx, http.MethodGet, "/admin/counters", nil, &out)
	return out, err
}

// ResetCounters zeroes the call counters.
func (c *Client) ResetCounters(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/admin/counters", nil, nil)
}

// SetFaults replaces the fault rules.
func (c *Client) SetFaults(ctx context.Context, cfg behaviour.FaultConfig) error {
	return c.do(ctx, http.MethodPut, "/admin/faults", cfg, nil)
}

// SetLatency replaces the latency configuration.
func (c *Client) SetLatency(ctx context.Context, cfg behaviour.LatencyConfig) error {
	return c.do(ctx, http.MethodPut, "/admin/latency", cfg, nil)
}

// SetThrottling replaces the throttling configuration; buckets start full.
func (c *Client) SetThrottling(ctx context.Context, cfg behaviour.ThrottleConfig) error {
	return c.do(ctx, http.MethodPut, "/admin/throttling", cfg, nil)
}

// SetTiming replaces attach/detach delays and the eventual-consistency
// window.
func (c *Client) SetTiming(ctx context.Context, cfg state.TimingConfig) error {
	return c.do(ctx, http.MethodPut, "/admin/timing", cfg, nil)
}

// Dump reads the whole state.
func (c *Client) Dump(ctx context.Context) (state.Dump, error) {
	var out state.Dump
	err := c.do(ctx, http.MethodGet, "/admin/dump", nil, &out)
	return out, err
}

// Remaps reads the remaps of the reassignments EC2 was asked for, oldest
// first, each with its drawn delay and outcome.
func (c *Client) Remaps(ctx context.Context) ([]state.Remap, error) {
	var out []state.Remap
	err := c.do(ctx, http.MethodGet, "/admin/remaps", nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s, %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s %s, %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e adminError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &e) != nil || e.Code == "" {
			e = adminError{Code: "HTTP" + resp.Status, Message: string(b)}
		}
		return &state.APIError{Code: e.Code, Message: e.Message, HTTPStatus: resp.StatusCode}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding %s %s, %w", method, path, err)
	}
	return nil
}
