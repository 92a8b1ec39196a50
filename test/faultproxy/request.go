package faultproxy

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Request is what a rule sees of a Kubernetes API request: the same
// attributes as the apiserver's own request info.
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection; a request outside the resource API (/healthz,
	// /version, discovery) has the HTTP method in lower case.
	Verb      string
	Group     string
	Namespace string
	// Resource is the plural name: ciliumnodes, leases, configmaps.
	Resource    string
	Subresource string
	// Name is the object's; for a create, the name in a JSON body
	// (custom resources; clients may send built-in types as protobuf,
	// whose creates then have no name here).
	Name string
}

// parseRequest reads the resource path of the Kubernetes API:
// /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]] and the
// same under /apis/{group}/{version}; a create's name comes from body.
func parseRequest(r *http.Request, body []byte) Request {
	req := Request{Verb: strings.ToLower(r.Method)}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		req.Group = parts[1]
		parts = parts[3:]
	default:
		return req
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		req.Namespace = parts[1]
		parts = parts[2:]
	}
	req.Resource = parts[0]
	if len(parts) > 1 {
		req.Name = parts[1]
	}
	if len(parts) > 2 {
		req.Subresource = strings.Join(parts[2:], "/")
	}
	watch := r.URL.Query().Get("watch")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch == "true" || watch == "1":
			req.Verb = "watch"
		case req.Name == "":
			req.Verb = "list"
		default:
			req.Verb = "get"
		}
	case http.MethodPost:
		req.Verb = "create"
		if req.Name == "" {
			var obj struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(body, &obj) == nil {
				req.Name = obj.Metadata.Name
			}
		}
	case http.MethodPut:
		req.Verb = "update"
	case http.MethodPatch:
		req.Verb = "patch"
	case http.MethodDelete:
		req.Verb = "delete"
		if req.Name == "" {
			req.Verb = "deletecollection"
		}
	}
	return req
}
