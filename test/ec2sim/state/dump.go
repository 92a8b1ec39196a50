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
	d.Vpcs = liveViews(s.vpcs.list, s.vpcView)
	d.Subnets = liveViews(s.subnets.list, s.subnetView)
	d.SecurityGroups = liveViews(s.groups.list, s.groupView)
	d.RouteTables = liveViews(s.routeTables.list, s.routeTableView)
	d.Instances = liveViews(s.instances.list, s.instanceView)
	d.NetworkInterfaces = liveViews(s.enis.list, s.eniView)
	d.Addresses = liveViews(s.addresses.list, s.addressView)
	return d
}

// DumpNetwork snapshots the network interfaces and Elastic IPs alone, in
// creation order, as Dump has them: for a test that checks addresses
// after every step and need not pay for the rest.
func (s *State) DumpNetwork() Dump {
	s.lock()
	defer s.unlock()
	d := Dump{Account: s.account, Region: s.region}
	d.NetworkInterfaces = liveViews(s.enis.list, s.eniView)
	d.Addresses = liveViews(s.addresses.list, s.addressView)
	return d
}

// liveViews renders the resources of list not removed, in its order.
func liveViews[T resource, V any](list []T, view func(T) V) []V {
	var out []V
	for _, r := range list {
		if !r.base().removed {
			out = append(out, view(r))
		}
	}
	return out
}
