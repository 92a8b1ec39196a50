package faultproxy

import (
	"net/http/httptest"
	"testing"
)

// TestRequestAttributes: verbs, groups, namespaces, names and
// subresources read from the paths client-go sends.
func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           Request
	}{
		{"GET", "/api/v1/namespaces/default/configmaps?watch=true", Request{Verb: "watch", Namespace: "default", Resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/default/configmaps", Request{Verb: "list", Namespace: "default", Resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/default", Request{Verb: "get", Resource: "namespaces", Name: "default"}},
		{"GET", "/api/v1/nodes/n1", Request{Verb: "get", Resource: "nodes", Name: "n1"}},
		{"PATCH", "/apis/cilium.io/v2/ciliumnodes/n1", Request{Verb: "patch", Group: "cilium.io", Resource: "ciliumnodes", Name: "n1"}},
		{"PATCH", "/apis/cilium.io/v2/ciliumnodes/n1/status", Request{Verb: "patch", Group: "cilium.io", Resource: "ciliumnodes", Name: "n1", Subresource: "status"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/enipam-operator", Request{Verb: "update", Group: "coordination.k8s.io", Namespace: "kube-system", Resource: "leases", Name: "enipam-operator"}},
		{"POST", "/api/v1/namespaces/default/events", Request{Verb: "create", Namespace: "default", Resource: "events"}},
		{"POST", "/api/v1/namespaces/default/configmaps", Request{Verb: "create", Namespace: "default", Resource: "configmaps", Name: "a"}},
		{"DELETE", "/api/v1/namespaces/default/configmaps/a", Request{Verb: "delete", Namespace: "default", Resource: "configmaps", Name: "a"}},
		{"DELETE", "/api/v1/namespaces/default/configmaps", Request{Verb: "deletecollection", Namespace: "default", Resource: "configmaps"}},
		{"GET", "/healthz", Request{Verb: "get"}},
		{"GET", "/apis/cilium.io/v2", Request{Verb: "get"}},
	} {
		var body []byte
		if tc.want.Resource == "configmaps" && tc.method == "POST" {
			body = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)
		}
		got := parseRequest(httptest.NewRequest(tc.method, tc.target, nil), body)
		if got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.target, got, tc.want)
		}
	}
}

// TestRuleMatching: Subresource "" is the object itself, "*" anything;
// patterns and body text narrow the match.
func TestRuleMatching(t *testing.T) {
	spec := Request{Verb: "patch", Resource: "ciliumnodes", Name: "node-1"}
	status := Request{Verb: "patch", Resource: "ciliumnodes", Name: "node-1", Subresource: "status"}
	for _, tc := range []struct {
		name string
		rule Rule
		req  Request
		body string
		want bool
	}{
		{"object rule, spec patch", Rule{Verbs: []string{"patch"}, Resource: "ciliumnodes"}, spec, "", true},
		{"object rule, status patch", Rule{Verbs: []string{"patch"}, Resource: "ciliumnodes"}, status, "", false},
		{"status rule, status patch", Rule{Subresource: "status"}, status, "", true},
		{"any subresource", Rule{Subresource: "*"}, spec, "", true},
		{"name pattern", Rule{Name: "node-*"}, spec, "", true},
		{"name pattern misses", Rule{Name: "other-*"}, spec, "", false},
		{"verb misses", Rule{Verbs: []string{"update"}}, spec, "", false},
		{"body holds the text", Rule{Subresource: "status", BodyContains: `"released"`}, status, `{"status":{"ipam":{"release-ips":{"10.0.0.1":"released"}}}}`, true},
		{"body lacks the text", Rule{Subresource: "status", BodyContains: `"released"`}, status, `{"status":{}}`, false},
	} {
		if got := tc.rule.matches(tc.req, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
