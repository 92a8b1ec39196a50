package ec2sim

import (
	"io"
	"net/http"
)

// NewHTTPClient returns an http.Client for SDK clients that talk to the
// emulator over loopback (ec2.Options.HTTPClient).
//
// Why: smithy-go closes a request's body as soon as the response headers
// arrive, and its body's WriteTo answers io.EOF once closed. net/http reads
// the body once more after sending it; when a fast local server has
// answered by then, that read fails, the transport closes the connection
// and the SDK fails decoding the answer with "use of closed network
// connection" (aws-sdk-go-v2 issues 1825 and 2737) — or, with retries on,
// sends the call a second time, which breaks exact call counts. Real EC2
// is too far away to win that race; an in-process emulator wins it now and
// then. Hiding WriterTo makes net/http read the body with Read, which
// treats the closed body's io.EOF as the end it is.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: bodyReadOnly{next: http.DefaultTransport.(*http.Transport).Clone()}}
}

// bodyReadOnly strips every interface but io.ReadCloser from request
// bodies.
type bodyReadOnly struct{ next http.RoundTripper }

func (t bodyReadOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.Clone(r.Context())
		r.Body = readCloser{r.Body}
	}
	return t.next.RoundTrip(r)
}

type readCloser struct{ io.ReadCloser }
