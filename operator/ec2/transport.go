package ec2

import (
	"io"
	"net/http"
	"time"
)

// newHTTPClient returns the client for EC2 calls: connections kept for
// many concurrent calls, and request bodies offered to net/http as plain
// readers. smithy-go closes a request body once the response headers
// arrive, and the closed body's WriteTo then fails; when the server
// answers before net/http's last read of the body (a nearby endpoint
// does), the call fails with "use of closed network connection" although
// EC2 served it, and a retry would repeat a mutating call (aws-sdk-go-v2
// issues 1825 and 2737). Without WriterTo, net/http reads with Read, which
// takes the closed body's io.EOF as the end it is.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: plainBodies{next: t}}
}

// plainBodies hides every interface of a request body but io.ReadCloser.
type plainBodies struct{ next http.RoundTripper }

func (p plainBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.Clone(r.Context())
		r.Body = struct{ io.ReadCloser }{r.Body}
	}
	return p.next.RoundTrip(r)
}
