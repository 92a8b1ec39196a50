package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestRunAnnouncesItsURLs starts the command on port 0 with the demo
// scenario and HTTPS, waits for the ready file, checks stdout carries the
// same line, calls the EC2, HTTPS and admin endpoints, and stops it.
func TestRunAnnouncesItsURLs(t *testing.T) {
	dir := t.TempDir()
	o := options{scenario: "demo", listen: "127.0.0.1:0", readyFile: filepath.Join(dir, "ready.json"),
		tlsListen: "127.0.0.1:0", tlsCert: filepath.Join(dir, "cert.pem"), seed: -1, logLevel: "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, &stdout, &logs) }()

	var raw []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(o.readyFile)
		if err == nil {
			raw = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready file after 10 s; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ep ec2sim.Endpoints
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatalf("ready file %q: %v", raw, err)
	}
	if strings.TrimSpace(stdout.String()) != strings.TrimSpace(string(raw)) {
		t.Errorf("stdout %q differs from the ready file %q", stdout.String(), raw)
	}
	if !strings.HasPrefix(ep.EC2, "http://127.0.0.1:") || !strings.HasPrefix(ep.EC2TLS, "https://127.0.0.1:") || ep.CertFile != o.tlsCert {
		t.Fatalf("endpoints %+v", ep)
	}

	resp, err := signedPost(t, http.DefaultClient, ep.EC2, "Action=DescribeVpcs&Version=2016-11-15")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DescribeVpcs over HTTP: %v %v", err, resp)
	}
	resp.Body.Close()
	c, err := ec2sim.NewAdminClient(ep.Admin, nil).Counters(ctx)
	if err != nil || c.Calls["DescribeVpcs"] != 1 {
		t.Errorf("counters %+v %v", c, err)
	}
	pem, err := os.ReadFile(o.tlsCert)
	if err != nil || !bytes.Contains(pem, []byte("BEGIN CERTIFICATE")) {
		t.Fatalf("certificate file: %v", err)
	}
	tlsClient := httpsClient(t, pem)
	resp, err = signedPost(t, tlsClient, ep.EC2TLS, "Action=DescribeSubnets&Version=2016-11-15")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DescribeSubnets over HTTPS: %v %v", err, resp)
	}
	resp.Body.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
}

// TestRunRejectsBadFlags checks option validation and a broken scenario.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, o := range []options{
		{scenario: "demo", listen: "127.0.0.1:0", tlsListen: "127.0.0.1:0", logLevel: "info"},
		{scenario: "demo", listen: "127.0.0.1:0", logLevel: "loud"},
		{scenario: filepath.Join(t.TempDir(), "missing.yaml"), listen: "127.0.0.1:0", logLevel: "info"},
	} {
		if err := run(context.Background(), o, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// signedPost posts an ec2query form signed with the demo scenario's
// default credentials, as an SDK client would.
func signedPost(t *testing.T, c *http.Client, url, form string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sum := sha256.Sum256([]byte(form))
	creds := aws.Credentials{AccessKeyID: ec2sim.DefaultAccessKeyID, SecretAccessKey: ec2sim.DefaultSecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "ec2", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return c.Do(req)
}
