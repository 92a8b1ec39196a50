package state

// The types below are the engine's answers. They are plain values, copies
// taken under the State's lock, shaped like EC2's response elements: the xml
// tags are EC2's element names, so the HTTP layer writes them as they are.

// Tag is a key/value pair on a resource.
type Tag struct {
	Key   string `xml:"key" json:"key"`
	Value string `xml:"value" json:"value"`
}

// GroupIdentifier names a security group on an ENI or instance.
type GroupIdentifier struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

// Attachment is an ENI's attachment to an instance.
type Attachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId"`
	InstanceOwnerID     string `xml:"instanceOwnerId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

// Association is an Elastic IP associated with a private address.
type Association struct {
	AllocationID  string `xml:"allocationId"`
	AssociationID string `xml:"associationId"`
	IPOwnerID     string `xml:"ipOwnerId"`
	PublicIP      string `xml:"publicIp"`
	PublicDNSName string `xml:"publicDnsName"`
}

// PrivateIPAddress is one IPv4 address of an ENI.
type PrivateIPAddress struct {
	PrivateIPAddress string       `xml:"privateIpAddress"`
	PrivateDNSName   string       `xml:"privateDnsName"`
	Primary          bool         `xml:"primary"`
	Association      *Association `xml:"association,omitempty"`
}

// IPv4Prefix is a /28 delegated to an ENI.
type IPv4Prefix struct {
	IPv4Prefix string `xml:"ipv4Prefix"`
}

// IPv6Address is one IPv6 address of an ENI. ec2sim does not model
// primary IPv6 addresses (EnablePrimaryIpv6): none is primary.
type IPv6Address struct {
	IPv6Address   string `xml:"ipv6Address"`
	IsPrimaryIPv6 bool   `xml:"isPrimaryIpv6"`
}

// IPv6Prefix is a /80 delegated to an ENI.
type IPv6Prefix struct {
	IPv6Prefix string `xml:"ipv6Prefix"`
}

// IPv6CidrBlockAssociation is a subnet's or a VPC's IPv6 CIDR; Pool and
// NetworkBorderGroup are the VPC's only.
type IPv6CidrBlockAssociation struct {
	AssociationID      string `xml:"associationId"`
	IPv6CidrBlock      string `xml:"ipv6CidrBlock"`
	State              string `xml:"ipv6CidrBlockState>state"`
	IPv6Pool           string `xml:"ipv6Pool,omitempty"`
	NetworkBorderGroup string `xml:"networkBorderGroup,omitempty"`
}

// NetworkInterface is an ENI as DescribeNetworkInterfaces (and, minus a few
// elements, DescribeInstances) shows it.
type NetworkInterface struct {
	NetworkInterfaceID string             `xml:"networkInterfaceId"`
	SubnetID           string             `xml:"subnetId"`
	VpcID              string             `xml:"vpcId"`
	AvailabilityZone   string             `xml:"availabilityZone"`
	AvailabilityZoneID string             `xml:"availabilityZoneId"`
	Description        string             `xml:"description"`
	OwnerID            string             `xml:"ownerId"`
	RequesterManaged   bool               `xml:"requesterManaged"`
	Status             string             `xml:"status"`
	MacAddress         string             `xml:"macAddress"`
	PrivateIPAddress   string             `xml:"privateIpAddress"`
	PrivateDNSName     string             `xml:"privateDnsName"`
	SourceDestCheck    bool               `xml:"sourceDestCheck"`
	InterfaceType      string             `xml:"interfaceType"`
	Groups             []GroupIdentifier  `xml:"groupSet>item"`
	Attachment         *Attachment        `xml:"attachment,omitempty"`
	Association        *Association       `xml:"association,omitempty"`
	Tags               []Tag              `xml:"tagSet>item"`
	PrivateIPAddresses []PrivateIPAddress `xml:"privateIpAddressesSet>item"`
	IPv4Prefixes       []IPv4Prefix       `xml:"ipv4PrefixSet>item"`
	// IPv6Address is the ENI's first IPv6 address, empty without one.
	IPv6Address   string        `xml:"ipv6Address,omitempty"`
	IPv6Addresses []IPv6Address `xml:"ipv6AddressesSet>item"`
	IPv6Prefixes  []IPv6Prefix  `xml:"ipv6PrefixSet>item"`
}

// InstanceState is an instance's lifecycle state with EC2's code.
type InstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

// Placement is where an instance runs.
type Placement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	Tenancy            string `xml:"tenancy"`
}

// Instance is an instance as DescribeInstances shows it.
type Instance struct {
	InstanceID        string             `xml:"instanceId"`
	ImageID           string             `xml:"imageId"`
	State             InstanceState      `xml:"instanceState"`
	PrivateDNSName    string             `xml:"privateDnsName"`
	InstanceType      string             `xml:"instanceType"`
	LaunchTime        string             `xml:"launchTime"`
	Placement         Placement          `xml:"placement"`
	SubnetID          string             `xml:"subnetId,omitempty"`
	VpcID             string             `xml:"vpcId,omitempty"`
	PrivateIPAddress  string             `xml:"privateIpAddress,omitempty"`
	SourceDestCheck   bool               `xml:"sourceDestCheck"`
	Groups            []GroupIdentifier  `xml:"groupSet>item"`
	Architecture      string             `xml:"architecture"`
	Hypervisor        string             `xml:"hypervisor"`
	RootDeviceType    string             `xml:"rootDeviceType"`
	Virtualization    string             `xml:"virtualizationType"`
	Tags              []Tag              `xml:"tagSet>item"`
	NetworkInterfaces []NetworkInterface `xml:"networkInterfaceSet>item"`
}

// Reservation groups instances launched together; the emulator launches
// them one at a time.
type Reservation struct {
	ReservationID string     `xml:"reservationId"`
	OwnerID       string     `xml:"ownerId"`
	Instances     []Instance `xml:"instancesSet>item"`
}

// NetworkCard is one network card of an instance type.
type NetworkCard struct {
	NetworkCardIndex         int `xml:"networkCardIndex"`
	MaximumNetworkInterfaces int `xml:"maximumNetworkInterfaces"`
	// InterfaceTypes are the interface types the card takes: interface,
	// and efa and efa-only on a type with EFA.
	InterfaceTypes []string `xml:"interfaceTypeSet>item"`
}

// EfaInfo is an instance type's Elastic Fabric Adapter limit.
type EfaInfo struct {
	MaximumEfaInterfaces int `xml:"maximumEfaInterfaces"`
}

// NetworkInfo is an instance type's network limits.
type NetworkInfo struct {
	MaximumNetworkInterfaces  int           `xml:"maximumNetworkInterfaces"`
	IPv4AddressesPerInterface int           `xml:"ipv4AddressesPerInterface"`
	IPv6AddressesPerInterface int           `xml:"ipv6AddressesPerInterface"`
	IPv6Supported             bool          `xml:"ipv6Supported"`
	MaximumNetworkCards       int           `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int           `xml:"defaultNetworkCardIndex"`
	NetworkCards              []NetworkCard `xml:"networkCards>item"`
	EnaSupport                string        `xml:"enaSupport"`
	EfaSupported              bool          `xml:"efaSupported"`
	EfaInfo                   *EfaInfo      `xml:"efaInfo,omitempty"`
}

// InstanceTypeInfo is an instance type as DescribeInstanceTypes shows it.
type InstanceTypeInfo struct {
	InstanceType      string `xml:"instanceType"`
	CurrentGeneration bool   `xml:"currentGeneration"`
	BareMetal         bool   `xml:"bareMetal"`
	Hypervisor        string `xml:"hypervisor,omitempty"`
	DefaultVCPUs      int    `xml:"vCpuInfo>defaultVCpus"`
	MemorySizeInMiB   int    `xml:"memoryInfo>sizeInMiB"`
	// SupportedArchitectures is ProcessorInfo's: x86_64, arm64,
	// x86_64_mac or arm64_mac.
	SupportedArchitectures []string    `xml:"processorInfo>supportedArchitectures>item"`
	NetworkInfo            NetworkInfo `xml:"networkInfo"`
}

// Subnet is a subnet as DescribeSubnets shows it.
type Subnet struct {
	SubnetID                string `xml:"subnetId"`
	SubnetArn               string `xml:"subnetArn"`
	State                   string `xml:"state"`
	VpcID                   string `xml:"vpcId"`
	OwnerID                 string `xml:"ownerId"`
	CidrBlock               string `xml:"cidrBlock"`
	AvailableIPAddressCount int    `xml:"availableIpAddressCount"`
	AvailabilityZone        string `xml:"availabilityZone"`
	AvailabilityZoneID      string `xml:"availabilityZoneId"`
	DefaultForAz            bool   `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool   `xml:"mapPublicIpOnLaunch"`
	Tags                    []Tag  `xml:"tagSet>item"`
	// IPv6Cidrs holds the subnet's /64, if it has one.
	IPv6Cidrs                   []IPv6CidrBlockAssociation `xml:"ipv6CidrBlockAssociationSet>item"`
	AssignIPv6AddressOnCreation bool                       `xml:"assignIpv6AddressOnCreation"`
}

// CidrBlockAssociation is one IPv4 CIDR of a VPC.
type CidrBlockAssociation struct {
	AssociationID string `xml:"associationId"`
	CidrBlock     string `xml:"cidrBlock"`
	State         string `xml:"cidrBlockState>state"`
}

// Vpc is a VPC as DescribeVpcs shows it.
type Vpc struct {
	VpcID            string                 `xml:"vpcId"`
	OwnerID          string                 `xml:"ownerId"`
	State            string                 `xml:"state"`
	CidrBlock        string                 `xml:"cidrBlock"`
	CidrAssociations []CidrBlockAssociation `xml:"cidrBlockAssociationSet>item"`
	// IPv6Cidrs holds the VPC's /56, if it has one.
	IPv6Cidrs       []IPv6CidrBlockAssociation `xml:"ipv6CidrBlockAssociationSet>item"`
	DhcpOptionsID   string                     `xml:"dhcpOptionsId"`
	InstanceTenancy string                     `xml:"instanceTenancy"`
	IsDefault       bool                       `xml:"isDefault"`
	Tags            []Tag                      `xml:"tagSet>item"`
}

// SecurityGroup is a group as DescribeSecurityGroups shows it.
type SecurityGroup struct {
	OwnerID     string `xml:"ownerId"`
	GroupID     string `xml:"groupId"`
	GroupName   string `xml:"groupName"`
	Description string `xml:"groupDescription"`
	VpcID       string `xml:"vpcId"`
	Arn         string `xml:"securityGroupArn"`
	Tags        []Tag  `xml:"tagSet>item"`
}

// Route is one route of a route table.
type Route struct {
	DestinationCidrBlock string `xml:"destinationCidrBlock"`
	GatewayID            string `xml:"gatewayId"`
	Origin               string `xml:"origin"`
	State                string `xml:"state"`
}

// RouteTableAssociation links a route table to a subnet, or marks it main.
type RouteTableAssociation struct {
	AssociationID string `xml:"routeTableAssociationId"`
	RouteTableID  string `xml:"routeTableId"`
	SubnetID      string `xml:"subnetId,omitempty"`
	Main          bool   `xml:"main"`
	State         string `xml:"associationState>state"`
}

// RouteTable is a route table as DescribeRouteTables shows it.
type RouteTable struct {
	RouteTableID string                  `xml:"routeTableId"`
	VpcID        string                  `xml:"vpcId"`
	OwnerID      string                  `xml:"ownerId"`
	Routes       []Route                 `xml:"routeSet>item"`
	Associations []RouteTableAssociation `xml:"associationSet>item"`
	Tags         []Tag                   `xml:"tagSet>item"`
}

// Address is an Elastic IP as DescribeAddresses shows it.
type Address struct {
	AllocationID            string `xml:"allocationId"`
	PublicIP                string `xml:"publicIp"`
	Domain                  string `xml:"domain"`
	AssociationID           string `xml:"associationId,omitempty"`
	InstanceID              string `xml:"instanceId,omitempty"`
	NetworkInterfaceID      string `xml:"networkInterfaceId,omitempty"`
	NetworkInterfaceOwnerID string `xml:"networkInterfaceOwnerId,omitempty"`
	PrivateIPAddress        string `xml:"privateIpAddress,omitempty"`
	NetworkBorderGroup      string `xml:"networkBorderGroup"`
	PublicIPv4Pool          string `xml:"publicIpv4Pool"`
	Tags                    []Tag  `xml:"tagSet>item"`
}
