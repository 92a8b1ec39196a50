package ec2sim

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
)

// imdsService answers IMDSv2 for any instance: session tokens from
// PUT /latest/api/token, then metadata with the token. Tokens are signed,
// not stored: they carry their instance and expiry.
type imdsService struct {
	state *State
	now   func() time.Time
	key   []byte
}

const (
	imdsTokenHeader = "X-Aws-Ec2-Metadata-Token"
	imdsTTLHeader   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	imdsMaxTTL      = 21600
)

func newIMDS(st *State, now func() time.Time, seed uint64) *imdsService {
	key := binary.BigEndian.AppendUint64([]byte("ec2sim-imds"), seed)
	return &imdsService{state: st, now: now, key: key}
}

func (m *imdsService) sign(payload string) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (m *imdsService) newToken(instanceID string, ttl time.Duration) string {
	payload := instanceID + "|" + strconv.FormatInt(m.now().Add(ttl).UnixMilli(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + m.sign(payload)
}

func (m *imdsService) validToken(instanceID, tok string) bool {
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

// handler serves the IMDS of one instance.
func (m *imdsService) handler(instanceID string) http.Handler {
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
		md, err := m.state.instanceMetadata(instanceID)
		if err != nil || md.down {
			http.NotFound(w, r)
			return
		}
		switch {
		case r.URL.Path == "/latest/dynamic/instance-identity/document":
			w.Header().Set("Content-Type", "text/plain")
			_ = json.NewEncoder(w).Encode(md.identityDocument())
		case r.URL.Path == "/latest/meta-data" || strings.HasPrefix(r.URL.Path, "/latest/meta-data/"):
			path := strings.Trim(strings.TrimPrefix(r.URL.Path, "/latest/meta-data"), "/")
			body, found := lookupMetadata(md.tree(), path)
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

func (m *imdsService) serveToken(w http.ResponseWriter, r *http.Request, instanceID string) {
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
	if _, err := m.state.instanceMetadata(instanceID); err != nil {
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

// instanceMeta is what IMDS tells an instance about itself.
type instanceMeta struct {
	id, typ, zone, zoneID, region, account, imageID, privateIP, mac, hostname string
	launched                                                                  time.Time
	// down: stopped or terminated, IMDS does not answer.
	down bool
	// publicIP is the Elastic IP of the primary address, if any.
	publicIP, publicHostname string
	enis                     []eniMeta
}

type eniMeta struct {
	mac, id, subnetID, subnetCIDR, vpcID string
	vpcCIDRs, ips, prefixes, groupIDs    []string
	groupNames                           []string
	// publicIPs are the Elastic IPs associated with the interface's
	// addresses, in the order of the addresses, and privateOf the
	// private address of each.
	publicIPs, privateOf     []string
	publicHostname           string
	deviceIndex, networkCard int
}

// instanceMetadata snapshots what IMDS shows: only attachments that have
// completed are visible, as on EC2.
func (s *State) instanceMetadata(id string) (instanceMeta, error) {
	s.lock()
	defer s.unlock()
	in, err := s.instanceByID(id)
	if err != nil {
		return instanceMeta{}, err
	}
	md := instanceMeta{
		id: in.id, typ: in.typ.Name, zone: in.subnet.zone.name, zoneID: in.subnet.zone.id, region: s.region,
		account: s.account, imageID: in.imageID, privateIP: in.primaryIP.String(),
		hostname: s.privateDNSName(in.primaryIP), launched: in.launched, down: !in.servesIMDS(),
	}
	for _, at := range sortedSlots(in) {
		e := in.slots[at]
		if e.attachment.status != attached {
			continue
		}
		em := eniMeta{mac: e.mac, id: e.id, subnetID: e.subnet.id, subnetCIDR: e.subnet.cidr.String(), vpcID: e.subnet.vpc.id,
			deviceIndex: at.device, networkCard: at.card}
		for _, c := range e.subnet.vpc.cidrs {
			em.vpcCIDRs = append(em.vpcCIDRs, c.String())
		}
		for _, ip := range e.ips {
			em.ips = append(em.ips, ip.String())
		}
		for _, p := range e.prefixes {
			em.prefixes = append(em.prefixes, p.String())
		}
		for _, g := range e.groups {
			em.groupIDs = append(em.groupIDs, g.id)
			em.groupNames = append(em.groupNames, g.name)
		}
		for _, ip := range e.ips {
			for _, a := range e.eips {
				if a.privateIP == ip {
					em.publicIPs = append(em.publicIPs, a.publicIP.String())
					em.privateOf = append(em.privateOf, ip.String())
					if ip == e.ips[0] {
						em.publicHostname = s.publicDNSName(a.publicIP)
					}
				}
			}
		}
		if at == primarySlot {
			md.mac = e.mac
			if em.publicHostname != "" {
				md.publicIP, md.publicHostname = em.publicIPs[0], em.publicHostname
			}
		}
		md.enis = append(md.enis, em)
	}
	return md, nil
}

// tree flattens the metadata into leaf paths.
func (md instanceMeta) tree() map[string]string {
	t := map[string]string{
		"ami-id":                         md.imageID,
		"instance-id":                    md.id,
		"instance-type":                  md.typ,
		"local-ipv4":                     md.privateIP,
		"local-hostname":                 md.hostname,
		"hostname":                       md.hostname,
		"mac":                            md.mac,
		"placement/availability-zone":    md.zone,
		"placement/availability-zone-id": md.zoneID,
		"placement/region":               md.region,
		"services/domain":                "amazonaws.com",
		"services/partition":             "aws",
	}
	for _, e := range md.enis {
		p := "network/interfaces/macs/" + e.mac + "/"
		t[p+"device-number"] = strconv.Itoa(e.deviceIndex)
		t[p+"network-card"] = strconv.Itoa(e.networkCard)
		t[p+"interface-id"] = e.id
		t[p+"mac"] = e.mac
		t[p+"owner-id"] = md.account
		t[p+"local-hostname"] = md.hostname
		if len(e.ips) > 0 {
			// An EFA-only interface has none; whether EC2 then answers
			// 404 or an empty list is not documented (see doc.go).
			t[p+"local-ipv4s"] = strings.Join(e.ips, "\n")
		}
		t[p+"security-group-ids"] = strings.Join(e.groupIDs, "\n")
		t[p+"security-groups"] = strings.Join(e.groupNames, "\n")
		t[p+"subnet-id"] = e.subnetID
		t[p+"subnet-ipv4-cidr-block"] = e.subnetCIDR
		t[p+"vpc-id"] = e.vpcID
		t[p+"vpc-ipv4-cidr-block"] = e.vpcCIDRs[0]
		t[p+"vpc-ipv4-cidr-blocks"] = strings.Join(e.vpcCIDRs, "\n")
		if len(e.prefixes) > 0 {
			t[p+"ipv4-prefix"] = strings.Join(e.prefixes, "\n")
		}
		// An interface's public addresses and which private address each
		// maps to; EC2 lists the keys only when there is one.
		if len(e.publicIPs) > 0 {
			t[p+"public-ipv4s"] = strings.Join(e.publicIPs, "\n")
			for i, pub := range e.publicIPs {
				t[p+"ipv4-associations/"+pub] = e.privateOf[i]
			}
		}
		if e.publicHostname != "" {
			t[p+"public-hostname"] = e.publicHostname
		}
	}
	if md.publicIP != "" {
		t["public-ipv4"] = md.publicIP
		t["public-hostname"] = md.publicHostname
	}
	return t
}

// identityDocument is /latest/dynamic/instance-identity/document.
func (md instanceMeta) identityDocument() map[string]any {
	return map[string]any{
		"accountId": md.account, "architecture": "x86_64", "availabilityZone": md.zone,
		"imageId": md.imageID, "instanceId": md.id, "instanceType": md.typ,
		"pendingTime": md.launched.UTC().Format(time.RFC3339), "privateIp": md.privateIP,
		"region": md.region, "version": "2017-09-30",
	}
}
