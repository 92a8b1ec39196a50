package state

import (
	"strconv"
	"strings"
	"time"
)

// InstanceMetadata is what IMDS tells an instance about itself.
type InstanceMetadata struct {
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
	// ipv6s, ipv6Prefixes and the subnet's and VPC's IPv6 CIDRs; empty
	// without IPv6.
	ipv6s, ipv6Prefixes []string
	subnetIPv6, vpcIPv6 string
	groupNames          []string
	// publicIPs are the Elastic IPs associated with the interface's
	// addresses, in the order of the addresses, and privateOf the
	// private address of each.
	publicIPs, privateOf     []string
	publicHostname           string
	deviceIndex, networkCard int
}

// InstanceMetadata snapshots what IMDS shows: only attachments that have
// completed are visible, as on EC2.
func (s *State) InstanceMetadata(id string) (InstanceMetadata, error) {
	s.lock()
	defer s.unlock()
	in, err := s.instanceByID(id)
	if err != nil {
		return InstanceMetadata{}, err
	}
	md := InstanceMetadata{
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
		for _, ip := range e.ipv6s {
			em.ipv6s = append(em.ipv6s, ip.String())
		}
		for _, p := range e.ipv6Prefixes {
			em.ipv6Prefixes = append(em.ipv6Prefixes, p.String())
		}
		if v := e.subnet.ipv6; v != nil {
			em.subnetIPv6 = v.cidr.String()
		}
		if c := e.subnet.vpc.ipv6CIDR; c.IsValid() {
			em.vpcIPv6 = c.String()
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

// Tree flattens the metadata into leaf paths.
func (md InstanceMetadata) Tree() map[string]string {
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
		// IPv6: EC2 lists each key only when the interface, its subnet
		// or its VPC has some.
		if len(e.ipv6s) > 0 {
			t[p+"ipv6s"] = strings.Join(e.ipv6s, "\n")
		}
		if len(e.ipv6Prefixes) > 0 {
			t[p+"ipv6-prefix"] = strings.Join(e.ipv6Prefixes, "\n")
		}
		if e.subnetIPv6 != "" {
			t[p+"subnet-ipv6-cidr-blocks"] = e.subnetIPv6
		}
		if e.vpcIPv6 != "" {
			t[p+"vpc-ipv6-cidr-blocks"] = e.vpcIPv6
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

// IdentityDocument is /latest/dynamic/instance-identity/document.
func (md InstanceMetadata) IdentityDocument() map[string]any {
	return map[string]any{
		"accountId": md.account, "architecture": "x86_64", "availabilityZone": md.zone,
		"imageId": md.imageID, "instanceId": md.id, "instanceType": md.typ,
		"pendingTime": md.launched.UTC().Format(time.RFC3339), "privateIp": md.privateIP,
		"region": md.region, "version": "2017-09-30",
	}
}

// Down reports an instance stopped or terminated: IMDS does not answer.
func (md InstanceMetadata) Down() bool { return md.down }
