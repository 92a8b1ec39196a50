package ec2sim_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestDescribeInstanceTypesShowsNetworkCards: through the SDK, a
// p5.48xlarge shows 32 network cards of 2 interfaces each (64 in all),
// EFA with 32 interfaces, and cards taking interface, efa and efa-only;
// an m5.large one card of 3 and no EFA; the EFA filter finds exactly the
// catalog's EFA types.
func TestDescribeInstanceTypesShowsNetworkCards(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	out, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"p5.48xlarge", "m5.large"}})
	noErr(t, err)
	byName := map[string]types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		byName[string(it.InstanceType)] = it
	}
	p5 := byName["p5.48xlarge"].NetworkInfo
	if aws.ToInt32(p5.MaximumNetworkInterfaces) != 64 || aws.ToInt32(p5.MaximumNetworkCards) != 32 || len(p5.NetworkCards) != 32 {
		t.Fatalf("p5.48xlarge: %d interfaces, %d cards, %d listed", aws.ToInt32(p5.MaximumNetworkInterfaces), aws.ToInt32(p5.MaximumNetworkCards), len(p5.NetworkCards))
	}
	for i, c := range p5.NetworkCards {
		if aws.ToInt32(c.NetworkCardIndex) != int32(i) || aws.ToInt32(c.MaximumNetworkInterfaces) != 2 ||
			!slices.Equal(c.InterfaceTypes, []types.NetworkCardInterfaceType{"interface", "efa", "efa-only"}) {
			t.Errorf("p5.48xlarge card %d: index %d, %d interfaces, types %v", i, aws.ToInt32(c.NetworkCardIndex), aws.ToInt32(c.MaximumNetworkInterfaces), c.InterfaceTypes)
		}
	}
	if !aws.ToBool(p5.EfaSupported) || p5.EfaInfo == nil || aws.ToInt32(p5.EfaInfo.MaximumEfaInterfaces) != 32 {
		t.Errorf("p5.48xlarge EFA: supported %v, info %+v", aws.ToBool(p5.EfaSupported), p5.EfaInfo)
	}
	m5 := byName["m5.large"].NetworkInfo
	if aws.ToInt32(m5.MaximumNetworkInterfaces) != 3 || len(m5.NetworkCards) != 1 || aws.ToBool(m5.EfaSupported) || m5.EfaInfo != nil {
		t.Errorf("m5.large: %d interfaces, cards %d, efa %v %+v", aws.ToInt32(m5.MaximumNetworkInterfaces), len(m5.NetworkCards), aws.ToBool(m5.EfaSupported), m5.EfaInfo)
	}

	var efa []string
	p := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{
		Filters: []types.Filter{{Name: aws.String("network-info.efa-supported"), Values: []string{"true"}}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		noErr(t, err)
		for _, it := range page.InstanceTypes {
			efa = append(efa, string(it.InstanceType))
		}
	}
	var want []string
	for _, it := range ec2sim.Catalog() {
		if it.MaxEFA > 0 {
			want = append(want, it.Name)
		}
	}
	if !slices.Equal(efa, want) || len(want) < 5 {
		t.Errorf("EFA types %v, want %v", efa, want)
	}
}

// p4dLayout is how AWS recommends booting an EFA instance with several
// cards, plus an ordinary interface on card 1: the primary ENA (card 0,
// device 0), an EFA-only interface on card 0 at device 1, an EFA-only
// interface at device 0 of card 1 and an ENA at device 1 of card 1.
var p4dLayout = []ec2sim.LaunchInterface{
	{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"},
	{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
	{NetworkCardIndex: 1, DeviceIndex: 1, SecondaryIPs: 2},
}

// TestMultiCardInstanceBootsWithItsInterfaces: a p4d.24xlarge launched
// with p4dLayout shows four ENIs through DescribeInstances, each with its
// card and device index; the EFA-only ones hold no address; IMDS names
// each interface's card and device number, and has no local-ipv4s for an
// EFA-only one.
func TestMultiCardInstanceBootsWithItsInterfaces(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	info, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "p4d.24xlarge", SubnetID: "big", NetworkInterfaces: p4dLayout})
	noErr(t, err)
	in := e.instanceByID(info.InstanceID)
	type place struct {
		card, device int32
		typ          string
		ips          int
	}
	var got []place
	for _, ni := range in.NetworkInterfaces {
		got = append(got, place{aws.ToInt32(ni.Attachment.NetworkCardIndex), aws.ToInt32(ni.Attachment.DeviceIndex), aws.ToString(ni.InterfaceType), len(ni.PrivateIpAddresses)})
	}
	want := []place{{0, 0, "interface", 1}, {0, 1, "efa-only", 0}, {1, 0, "efa-only", 0}, {1, 1, "interface", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("interfaces %+v, want %+v", got, want)
	}

	md := e.imdsClient(info.InstanceID)
	for _, ni := range in.NetworkInterfaces {
		base := "network/interfaces/macs/" + aws.ToString(ni.MacAddress) + "/"
		if card := imdsGet(t, e.ctx, md, base+"network-card"); card != itoa(aws.ToInt32(ni.Attachment.NetworkCardIndex)) {
			t.Errorf("%s: network-card %q", aws.ToString(ni.NetworkInterfaceId), card)
		}
		if dev := imdsGet(t, e.ctx, md, base+"device-number"); dev != itoa(aws.ToInt32(ni.Attachment.DeviceIndex)) {
			t.Errorf("%s: device-number %q", aws.ToString(ni.NetworkInterfaceId), dev)
		}
		_, err := md.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: base + "local-ipv4s"})
		if hasIPs := err == nil; hasIPs != (aws.ToString(ni.InterfaceType) != "efa-only") {
			t.Errorf("%s (%s): local-ipv4s answered %v", aws.ToString(ni.NetworkInterfaceId), aws.ToString(ni.InterfaceType), err)
		}
	}
}

// TestAttachHonoursNetworkCards: on the p4d.24xlarge of p4dLayout, Attach
// places ENIs by card and device index: a taken device index on either
// card is refused, a free one on card 0 or 2 is taken and the answer
// names the card, a card the type lacks is refused. A p5.48xlarge takes
// 2 interfaces on card 0 and refuses a third there
// (AttachmentLimitExceeded) while card 1 takes its own 2. An EFA cannot be
// attached to or detached from the running instance, and an EFA-only
// interface takes no address.
func TestAttachHonoursNetworkCards(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	p4d, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "p4d.24xlarge", SubnetID: "big", NetworkInterfaces: p4dLayout})
	noErr(t, err)
	attach := func(instanceID string, card, device int32) (*ec2.AttachNetworkInterfaceOutput, error) {
		ni := e.createENI("big", 0)
		return e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
			NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: aws.String(instanceID),
			DeviceIndex: aws.Int32(device), NetworkCardIndex: aws.Int32(card),
		})
	}
	_, err = attach(p4d.InstanceID, 0, 1)
	wantCode(t, err, "InvalidParameterValue")
	_, err = attach(p4d.InstanceID, 1, 1)
	wantCode(t, err, "InvalidParameterValue")
	_, err = attach(p4d.InstanceID, 4, 0)
	wantCode(t, err, "InvalidParameterValue")
	for _, card := range []int32{0, 2} {
		out, err := attach(p4d.InstanceID, card, 2)
		noErr(t, err)
		if aws.ToInt32(out.NetworkCardIndex) != card {
			t.Errorf("attach on card %d answered card %d", card, aws.ToInt32(out.NetworkCardIndex))
		}
	}

	efa, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("big").SubnetId, InterfaceType: "efa"})
	noErr(t, err)
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: efa.NetworkInterface.NetworkInterfaceId, InstanceId: aws.String(p4d.InstanceID), DeviceIndex: aws.Int32(3),
	})
	wantCode(t, err, "IncorrectInstanceState")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: e.subnetByName("big").SubnetId, InterfaceType: "efa-only", SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	wantCode(t, err, "InvalidParameterCombination")
	for _, ni := range e.instanceByID(p4d.InstanceID).NetworkInterfaces {
		if aws.ToString(ni.InterfaceType) != "efa-only" {
			continue
		}
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
		wantCode(t, err, "InvalidParameterCombination")
		_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: ni.Attachment.AttachmentId})
		wantCode(t, err, "IncorrectInstanceState")
	}

	p5, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "p5.48xlarge", SubnetID: "big"})
	noErr(t, err)
	_, err = attach(p5.InstanceID, 0, 1)
	noErr(t, err)
	_, err = attach(p5.InstanceID, 0, 2)
	wantCode(t, err, "AttachmentLimitExceeded")
	for _, device := range []int32{0, 1} {
		_, err = attach(p5.InstanceID, 1, device)
		noErr(t, err)
	}
}

// TestLaunchRefusesEFAItCannotHave: an m5.large has no EFA, a c5n.18xlarge
// one; a launch asking for more is refused whole (no instance, no ENI
// left), naming the interface.
func TestLaunchRefusesEFAItCannotHave(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	before := len(e.sim.State().Dump().NetworkInterfaces)
	for _, req := range []ec2sim.LaunchRequest{
		{InstanceType: "m5.large", SubnetID: "big", NetworkInterfaces: []ec2sim.LaunchInterface{{DeviceIndex: 1, InterfaceType: "efa"}}},
		{InstanceType: "c5n.18xlarge", SubnetID: "big", NetworkInterfaces: []ec2sim.LaunchInterface{
			{DeviceIndex: 1, InterfaceType: "efa"}, {DeviceIndex: 2, InterfaceType: "efa-only"},
		}},
	} {
		_, err := e.sim.State().AddInstance(req)
		if err == nil {
			t.Fatalf("%s with %d EFAs launched", req.InstanceType, len(req.NetworkInterfaces))
		}
		t.Logf("%s: %v", req.InstanceType, err)
	}
	d := e.sim.State().Dump()
	if len(d.NetworkInterfaces) != before {
		t.Errorf("refused launches left %d ENIs", len(d.NetworkInterfaces)-before)
	}
	for _, in := range d.Instances {
		if in.InstanceType != "m5.large" && in.InstanceType != "t3.medium" {
			t.Errorf("refused launch left instance %s (%s)", in.InstanceID, in.InstanceType)
		}
	}
}

func imdsGet(t *testing.T, ctx context.Context, c *imds.Client, path string) string {
	t.Helper()
	out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	noErr(t, err)
	defer out.Content.Close()
	b := make([]byte, 64)
	n, _ := out.Content.Read(b)
	return string(b[:n])
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }

// instanceByID describes one instance.
func (e *env) instanceByID(id string) types.Instance {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	noErr(e.t, err)
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		e.t.Fatalf("instance %s: found %d reservations", id, len(out.Reservations))
	}
	return out.Reservations[0].Instances[0]
}
