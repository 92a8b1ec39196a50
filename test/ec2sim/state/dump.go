package state

// InstanceInfo is the admin API's summary of an instance.
type InstanceInfo struct {
	InstanceID       string `json:"instanceId"`
	InstanceType     string `json:"instanceType"`
	State            string `json:"state"`
	AvailabilityZone string `json:"availabilityZone"`
	SubnetID         string `json:"subnetId"`
	VpcID            string `json:"vpcId"`
	PrivateIP        string `json:"privateIp"`
	PrivateDNSName   string `json:"privateDnsName"`
	PrimaryENI       string `json:"primaryEni"`
	MAC              string `json:"mac"`
	// ProviderID is what a kubelet on this instance puts in Node
	// spec.providerID.
	ProviderID string `json:"providerId"`
}

// InfoOf summarises an instance for the admin API.
func InfoOf(v Instance) InstanceInfo {
	info := InstanceInfo{
		InstanceID: v.InstanceID, InstanceType: v.InstanceType, State: v.State.Name,
		AvailabilityZone: v.Placement.AvailabilityZone, SubnetID: v.SubnetID, VpcID: v.VpcID,
		PrivateIP: v.PrivateIPAddress, PrivateDNSName: v.PrivateDNSName,
		ProviderID: "aws:///" + v.Placement.AvailabilityZone + "/" + v.InstanceID,
	}
	for _, ni := range v.NetworkInterfaces {
		if ni.Attachment != nil && ni.Attachment.DeviceIndex == 0 {
			info.PrimaryENI, info.MAC = ni.NetworkInterfaceID, ni.MacAddress
		}
	}
	return info
}

// Dump is the whole state, for debugging and for tests that want to look
// at everything at once. Field names are the Go names of the view types.
type Dump struct {
	Account           string
	Region            string
	Vpcs              []Vpc
	Subnets           []Subnet
	SecurityGroups    []SecurityGroup
	RouteTables       []RouteTable
	Instances         []Instance
	NetworkInterfaces []NetworkInterface
	Addresses         []Address
}

// Dump snapshots every resource in creation order.
func (s *State) Dump() Dump {
	s.lock()
	defer s.unlock()
	d := Dump{Account: s.account, Region: s.region}
	live := func(m *meta) bool { return !m.removed }
	for _, v := range s.vpcs.list {
		if live(&v.meta) {
			d.Vpcs = append(d.Vpcs, s.vpcView(v))
		}
	}
	for _, sn := range s.subnets.list {
		if live(&sn.meta) {
			d.Subnets = append(d.Subnets, s.subnetView(sn))
		}
	}
	for _, g := range s.groups.list {
		if live(&g.meta) {
			d.SecurityGroups = append(d.SecurityGroups, s.groupView(g))
		}
	}
	for _, rt := range s.routeTables.list {
		if live(&rt.meta) {
			d.RouteTables = append(d.RouteTables, s.routeTableView(rt))
		}
	}
	for _, in := range s.instances.list {
		if live(&in.meta) {
			d.Instances = append(d.Instances, s.instanceView(in))
		}
	}
	for _, e := range s.enis.list {
		if live(&e.meta) {
			d.NetworkInterfaces = append(d.NetworkInterfaces, s.eniView(e))
		}
	}
	for _, a := range s.addresses.list {
		if live(&a.meta) {
			d.Addresses = append(d.Addresses, s.addressView(a))
		}
	}
	return d
}
