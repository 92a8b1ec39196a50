package ec2sim

import (
	"net/http"
	"time"

	"github.com/enipam/enipam/test/ec2sim/admin"
	"github.com/enipam/enipam/test/ec2sim/iam"
	"github.com/enipam/enipam/test/ec2sim/state"
	"github.com/enipam/enipam/test/ec2sim/wire"
)

// The model (package state: the account, EC2's rules, its requests and
// answers) under the names scenarios and callers use.
type (
	// APIError is state.APIError.
	APIError = state.APIError
	// Address is state.Address.
	Address = state.Address
	// AllocateAddressRequest is state.AllocateAddressRequest.
	AllocateAddressRequest = state.AllocateAddressRequest
	// AllocateAddressResponse is state.AllocateAddressResponse.
	AllocateAddressResponse = state.AllocateAddressResponse
	// AssignPrivateIpAddressesRequest is state.AssignPrivateIpAddressesRequest.
	AssignPrivateIpAddressesRequest = state.AssignPrivateIpAddressesRequest
	// AssignPrivateIpAddressesResponse is state.AssignPrivateIpAddressesResponse.
	AssignPrivateIpAddressesResponse = state.AssignPrivateIpAddressesResponse
	// AssignedPrivateIP is state.AssignedPrivateIP.
	AssignedPrivateIP = state.AssignedPrivateIP
	// AssociateAddressRequest is state.AssociateAddressRequest.
	AssociateAddressRequest = state.AssociateAddressRequest
	// AssociateAddressResponse is state.AssociateAddressResponse.
	AssociateAddressResponse = state.AssociateAddressResponse
	// Association is state.Association.
	Association = state.Association
	// AttachNetworkInterfaceRequest is state.AttachNetworkInterfaceRequest.
	AttachNetworkInterfaceRequest = state.AttachNetworkInterfaceRequest
	// AttachNetworkInterfaceResponse is state.AttachNetworkInterfaceResponse.
	AttachNetworkInterfaceResponse = state.AttachNetworkInterfaceResponse
	// Attachment is state.Attachment.
	Attachment = state.Attachment
	// CidrBlockAssociation is state.CidrBlockAssociation.
	CidrBlockAssociation = state.CidrBlockAssociation
	// CreateNetworkInterfaceRequest is state.CreateNetworkInterfaceRequest.
	CreateNetworkInterfaceRequest = state.CreateNetworkInterfaceRequest
	// CreateNetworkInterfaceResponse is state.CreateNetworkInterfaceResponse.
	CreateNetworkInterfaceResponse = state.CreateNetworkInterfaceResponse
	// CreateTagsRequest is state.CreateTagsRequest.
	CreateTagsRequest = state.CreateTagsRequest
	// DeleteTag is state.DeleteTag.
	DeleteTag = state.DeleteTag
	// DeleteTagsRequest is state.DeleteTagsRequest.
	DeleteTagsRequest = state.DeleteTagsRequest
	// DescribeAddressesResponse is state.DescribeAddressesResponse.
	DescribeAddressesResponse = state.DescribeAddressesResponse
	// DescribeInstanceTypesRequest is state.DescribeInstanceTypesRequest.
	DescribeInstanceTypesRequest = state.DescribeInstanceTypesRequest
	// DescribeInstanceTypesResponse is state.DescribeInstanceTypesResponse.
	DescribeInstanceTypesResponse = state.DescribeInstanceTypesResponse
	// DescribeInstancesResponse is state.DescribeInstancesResponse.
	DescribeInstancesResponse = state.DescribeInstancesResponse
	// DescribeNetworkInterfacesRequest is state.DescribeNetworkInterfacesRequest.
	DescribeNetworkInterfacesRequest = state.DescribeNetworkInterfacesRequest
	// DescribeNetworkInterfacesResponse is state.DescribeNetworkInterfacesResponse.
	DescribeNetworkInterfacesResponse = state.DescribeNetworkInterfacesResponse
	// DescribeRequest is state.DescribeRequest.
	DescribeRequest = state.DescribeRequest
	// DescribeRouteTablesResponse is state.DescribeRouteTablesResponse.
	DescribeRouteTablesResponse = state.DescribeRouteTablesResponse
	// DescribeSecurityGroupsResponse is state.DescribeSecurityGroupsResponse.
	DescribeSecurityGroupsResponse = state.DescribeSecurityGroupsResponse
	// DescribeSubnetsResponse is state.DescribeSubnetsResponse.
	DescribeSubnetsResponse = state.DescribeSubnetsResponse
	// DescribeVpcsResponse is state.DescribeVpcsResponse.
	DescribeVpcsResponse = state.DescribeVpcsResponse
	// Dump is state.Dump.
	Dump = state.Dump
	// ENISpec is state.ENISpec.
	ENISpec = state.ENISpec
	// EfaInfo is state.EfaInfo.
	EfaInfo = state.EfaInfo
	// ElasticIPSpec is state.ElasticIPSpec.
	ElasticIPSpec = state.ElasticIPSpec
	// Filter is state.Filter.
	Filter = state.Filter
	// GroupIdentifier is state.GroupIdentifier.
	GroupIdentifier = state.GroupIdentifier
	// IPv4Prefix is state.IPv4Prefix.
	IPv4Prefix = state.IPv4Prefix
	// IPv6Address is state.IPv6Address.
	IPv6Address = state.IPv6Address
	// IPv6Prefix is state.IPv6Prefix.
	IPv6Prefix = state.IPv6Prefix
	// Instance is state.Instance.
	Instance = state.Instance
	// InstanceInfo is state.InstanceInfo.
	InstanceInfo = state.InstanceInfo
	// InstanceMetadata is state.InstanceMetadata.
	InstanceMetadata = state.InstanceMetadata
	// InstanceSpec is state.InstanceSpec.
	InstanceSpec = state.InstanceSpec
	// InstanceState is state.InstanceState.
	InstanceState = state.InstanceState
	// InstanceType is state.InstanceType.
	InstanceType = state.InstanceType
	// InstanceTypeInfo is state.InstanceTypeInfo.
	InstanceTypeInfo = state.InstanceTypeInfo
	// LagConfig is state.LagConfig.
	LagConfig = state.LagConfig
	// LaunchInterface is state.LaunchInterface.
	LaunchInterface = state.LaunchInterface
	// LaunchRequest is state.LaunchRequest.
	LaunchRequest = state.LaunchRequest
	// ManualClock is state.ManualClock.
	ManualClock = state.ManualClock
	// ModifyNetworkInterfaceAttributeRequest is state.ModifyNetworkInterfaceAttributeRequest.
	ModifyNetworkInterfaceAttributeRequest = state.ModifyNetworkInterfaceAttributeRequest
	// NetworkCard is state.NetworkCard.
	NetworkCard = state.NetworkCard
	// NetworkInfo is state.NetworkInfo.
	NetworkInfo = state.NetworkInfo
	// NetworkInterface is state.NetworkInterface.
	NetworkInterface = state.NetworkInterface
	// Page is state.Page.
	Page = state.Page
	// Placement is state.Placement.
	Placement = state.Placement
	// PrivateIPAddress is state.PrivateIPAddress.
	PrivateIPAddress = state.PrivateIPAddress
	// PrivateIPSpec is state.PrivateIPSpec.
	PrivateIPSpec = state.PrivateIPSpec
	// Remap is state.Remap.
	Remap = state.Remap
	// Reservation is state.Reservation.
	Reservation = state.Reservation
	// ReturnResponse is state.ReturnResponse.
	ReturnResponse = state.ReturnResponse
	// Route is state.Route.
	Route = state.Route
	// RouteTable is state.RouteTable.
	RouteTable = state.RouteTable
	// RouteTableAssociation is state.RouteTableAssociation.
	RouteTableAssociation = state.RouteTableAssociation
	// Scenario is state.Scenario.
	Scenario = state.Scenario
	// ScenarioError is state.ScenarioError.
	ScenarioError = state.ScenarioError
	// SecurityGroup is state.SecurityGroup.
	SecurityGroup = state.SecurityGroup
	// SecurityGroupSpec is state.SecurityGroupSpec.
	SecurityGroupSpec = state.SecurityGroupSpec
	// State is state.State.
	State = state.State
	// Subnet is state.Subnet.
	Subnet = state.Subnet
	// SubnetSpec is state.SubnetSpec.
	SubnetSpec = state.SubnetSpec
	// Tag is state.Tag.
	Tag = state.Tag
	// TagSpecification is state.TagSpecification.
	TagSpecification = state.TagSpecification
	// TimingConfig is state.TimingConfig.
	TimingConfig = state.TimingConfig
	// UnassignPrivateIpAddressesRequest is state.UnassignPrivateIpAddressesRequest.
	UnassignPrivateIpAddressesRequest = state.UnassignPrivateIpAddressesRequest
	// VPCSpec is state.VPCSpec.
	VPCSpec = state.VPCSpec
	// Vpc is state.Vpc.
	Vpc = state.Vpc
)

// The identities that may call (package iam) under the same names.
type (
	// AuthorizationFailure is iam.AuthorizationFailure.
	AuthorizationFailure = iam.AuthorizationFailure
	// PrincipalSpec is iam.PrincipalSpec.
	PrincipalSpec = iam.PrincipalSpec
)

// ProfileRealistic is state.ProfileRealistic.
const ProfileRealistic = state.ProfileRealistic

// The outcomes of a Remap (state.RemapPending and the others).
const (
	RemapPending    = state.RemapPending
	RemapLanded     = state.RemapLanded
	RemapSuperseded = state.RemapSuperseded
	RemapLost       = state.RemapLost
)

// The default principal's credentials and the policies a principal can
// name (see package iam).
const (
	DefaultAccessKeyID     = iam.DefaultAccessKeyID
	DefaultSecretAccessKey = iam.DefaultSecretAccessKey
	DefaultPrincipalName   = iam.DefaultPrincipalName
	PolicyEnipam           = iam.PolicyEnipam
	PolicyAllowAll         = iam.PolicyAllowAll
)

// NewState is state.NewState.
func NewState(sc *Scenario, now func() time.Time) (*State, error) { return state.NewState(sc, now) }

// NewAPIError is state.NewAPIError.
func NewAPIError(code, message string) *APIError { return state.NewAPIError(code, message) }

// Catalog is state.Catalog.
func Catalog() []InstanceType { return state.Catalog() }

// NewManualClock is state.NewManualClock.
func NewManualClock(start time.Time) *ManualClock { return state.NewManualClock(start) }

// DemoScenario is state.DemoScenario.
func DemoScenario() *Scenario { return state.DemoScenario() }

// LoadScenario is state.LoadScenario.
func LoadScenario(path string) (*Scenario, error) { return state.LoadScenario(path) }

// ParseScenario is state.ParseScenario.
func ParseScenario(b []byte) (*Scenario, error) { return state.ParseScenario(b) }

// RealisticTiming is state.RealisticTiming.
func RealisticTiming() TimingConfig { return state.RealisticTiming() }

// DecodeAuthorizationMessage is iam.DecodeAuthorizationMessage.
func DecodeAuthorizationMessage(message string) (AuthorizationFailure, error) {
	return iam.DecodeAuthorizationMessage(message)
}

// DefaultPrincipal is iam.DefaultPrincipal.
func DefaultPrincipal(clusterName string) PrincipalSpec { return iam.DefaultPrincipal(clusterName) }

// AllowAllPrincipal is iam.AllowAllPrincipal.
func AllowAllPrincipal() PrincipalSpec { return iam.AllowAllPrincipal() }

// The wire's names callers use (package wire).
type (
	// Counters is wire.Counters.
	Counters = wire.Counters
)

// APIVersion is the only EC2 API version served (wire.APIVersion).
const APIVersion = wire.APIVersion

// AdminClient is a typed client of a Sim's admin API (admin.Client).
type AdminClient = admin.Client

// NewAdminClient is admin.NewClient.
func NewAdminClient(base string, hc *http.Client) *AdminClient { return admin.NewClient(base, hc) }
