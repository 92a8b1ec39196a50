package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// IMDS answers IMDSv2 for any instance: session tokens from
// PUT /latest/api/token, then metadata with the token. Tokens are signed,
// not stored: they carry their instance and expiry.
type IMDS struct {
	state *state.State
	now   func() time.Time
	key   []byte
}

const (
	imdsTokenHeader = "X-Aws-Ec2-Metadata-Token"
	imdsTTLHeader   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	imdsMaxTTL      = 21600
)

// NewIMDS serves the instance metadata of st; now dates and expires
// tokens, seed keys them.
func NewIMDS(st *state.State, now func() time.Time, seed uint64) *IMDS {
	key := binary.BigEndian.AppendUint64([]byte("ec2sim-imds"), seed)
	return &IMDS{state: st, now: now, key: key}
}

func (m *IMDS) sign(payload string) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (m *IMDS) newToken(instanceID string, ttl time.Duration) string {
	payload := instanceID + "|" + strconv.FormatInt(m.now().Add(ttl).UnixMilli(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + m.sign(payload)
}

func (m *IMDS) validToken(instanceID, tok string) bool {
	enc, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !hmac.Equal([]byte(sig), []byte(m.sign(string(raw)))) {
		return false
	}
	id, exp, _ := strings.Cut(string(raw), "|")
	ms, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && id == instanceID && m.now().UnixMilli() < ms
}

// Handler serves the IMDS of one instance.
func (m *IMDS) Handler(instanceID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "EC2ws")
		if r.URL.Path == "/latest/api/token" {
			m.serveToken(w, r, instanceID)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		if !m.validToken(instanceID, r.Header.Get(imdsTokenHeader)) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		md, err := m.state.InstanceMetadata(instanceID)
		if err != nil || md.Down() {
			http.NotFound(w, r)
			return
		}
		switch {
		case r.URL.Path == "/latest/dynamic/instance-identity/document":
			w.Header().Set("Content-Type", "text/plain")
			_ = json.NewEncoder(w).Encode(md.IdentityDocument())
		case r.URL.Path == "/latest/meta-data" || strings.HasPrefix(r.URL.Path, "/latest/meta-data/"):
			path := strings.Trim(strings.TrimPrefix(r.URL.Path, "/latest/meta-data"), "/")
			body, found := lookupMetadata(md.Tree(), path)
			if !found {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(body))
		default:
			http.NotFound(w, r)
		}
	})
}

func (m *IMDS) serveToken(w http.ResponseWriter, r *http.Request, instanceID string) {
	if r.Method != http.MethodPut {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(imdsTTLHeader))
	if err != nil || ttl < 1 || ttl > imdsMaxTTL {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	if _, err := m.state.InstanceMetadata(instanceID); err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set(imdsTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(m.newToken(instanceID, time.Duration(ttl)*time.Second)))
}

// lookupMetadata answers a metadata path from the leaf map: a leaf's value,
// or a directory's listing (subdirectories end in "/").
func lookupMetadata(tree map[string]string, path string) (string, bool) {
	if v, ok := tree[path]; ok {
		return v, true
	}
	prefix := path + "/"
	if path == "" {
		prefix = ""
	}
	var entries []string
	for k := range tree {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if head, _, nested := strings.Cut(rest, "/"); nested {
			rest = head + "/"
		}
		if !slices.Contains(entries, rest) {
			entries = append(entries, rest)
		}
	}
	if len(entries) == 0 {
		return "", false
	}
	slices.Sort(entries)
	return strings.Join(entries, "\n"), true
}
