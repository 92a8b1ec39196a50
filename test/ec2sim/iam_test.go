package ec2sim_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/enipam/enipam/test/ec2sim"
)

// policyScenario is one VPC with a pod subnet, an instance, and two
// Elastic IPs: one allocated by the cluster (tagged with it), one of
// somebody else. Its clusterName is prod-1: the default principal signs
// under the repository's policy for it.
const policyScenario = `
account: "123456789012"
region: us-east-1
clusterName: prod-1
zones: [us-east-1a]
vpcs:
- name: v
  cidrs: [10.0.0.0/16]
  subnets:
  - {name: pods, cidr: 10.0.64.0/20, zone: us-east-1a}
  securityGroups:
  - {name: pods}
instances:
- {name: node, type: m5.large, subnet: pods}
elasticIPs:
- tags: {enipam.io/cluster: prod-1, enipam.io/claim: default/db-0}
- tags: {team: web}
`

// unauthorized asserts err is UnauthorizedOperation (HTTP 403) whose
// encoded message names action on resource.
func unauthorized(t *testing.T, err error, action, resource string) ec2sim.AuthorizationFailure {
	t.Helper()
	wantStatus(t, err, "UnauthorizedOperation", 403)
	var ae smithy.APIError
	errors.As(err, &ae)
	f, derr := ec2sim.DecodeAuthorizationMessage(ae.ErrorMessage())
	if derr != nil {
		t.Fatalf("the encoded authorization message does not decode: %v (%s)", derr, ae.ErrorMessage())
	}
	if f.Allowed || f.Action != action || f.Resource != resource || f.Principal != "arn:aws:iam::123456789012:user/enipam-operator" {
		t.Errorf("authorization failure %+v, want %s on %s", f, action, resource)
	}
	return f
}

func clusterTag(value string) []types.TagSpecification {
	return []types.TagSpecification{{ResourceType: types.ResourceTypeElasticIp,
		Tags: []types.Tag{{Key: aws.String("enipam.io/cluster"), Value: aws.String(value)}, {Key: aws.String("enipam.io/claim"), Value: aws.String("default/db-1")}}}}
}

// TestOperatorPolicyRefusesWhatEC2Would: under docs/iam/policy.json for
// cluster prod-1, through the SDK: AllocateAddress without the cluster tag
// or with another cluster's is UnauthorizedOperation (403, with a
// decodable message naming ec2:AllocateAddress on elastic-ip/*), with it
// the address is allocated; ReleaseAddress of an address without the tag
// is refused and leaves it, of the cluster's releases it; CreateTags is
// allowed only as tag-on-create (CreateNetworkInterface with
// TagSpecifications passes, CreateTags on the ENI afterwards does not);
// an action the policy does not name (DeleteTags) is refused, and
// DetachNetworkInterface and DeleteNetworkInterface pass on the cluster's
// ENI and are refused on an ENI without the cluster tag. DryRun answers by the policy: DryRunOperation (412) where
// allowed, UnauthorizedOperation where not, and changes nothing.
func TestOperatorPolicyRefusesWhatEC2Would(t *testing.T) {
	sc := scenario(t, policyScenario)
	sc.Principals = []ec2sim.PrincipalSpec{ec2sim.DefaultPrincipal("")} // the scenario's clusterName
	e := newEnv(t, sc)
	ctx, c := e.ctx, e.ec2
	d, err := e.admin.Dump(ctx)
	noErr(t, err)
	ours, theirs := d.Addresses[0].AllocationID, d.Addresses[1].AllocationID
	eipAny := "arn:aws:ec2:us-east-1:123456789012:elastic-ip/*"

	_, err = c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc})
	f := unauthorized(t, err, "ec2:AllocateAddress", eipAny)
	if f.ExplicitDeny {
		t.Errorf("an implicit deny reported explicit: %+v", f)
	}
	_, err = c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, TagSpecifications: clusterTag("prod-2")})
	f = unauthorized(t, err, "ec2:AllocateAddress", eipAny)
	if got := f.Conditions["aws:requesttag/enipam.io/cluster"]; len(got) != 1 || got[0] != "prod-2" {
		t.Errorf("the message does not show the request tag: %+v", f.Conditions)
	}
	_, err = c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, TagSpecifications: clusterTag("prod-1"), DryRun: aws.Bool(true)})
	wantStatus(t, err, "DryRunOperation", 412)
	_, err = c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, DryRun: aws.Bool(true)})
	unauthorized(t, err, "ec2:AllocateAddress", eipAny)
	if d, _ := e.admin.Dump(ctx); len(d.Addresses) != 2 {
		t.Fatalf("refused and dry-run allocations allocated: %d addresses", len(d.Addresses))
	}
	allocated, err := c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, TagSpecifications: clusterTag("prod-1")})
	noErr(t, err)

	theirARN := "arn:aws:ec2:us-east-1:123456789012:elastic-ip/" + theirs
	_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(theirs), DryRun: aws.Bool(true)})
	unauthorized(t, err, "ec2:ReleaseAddress", theirARN)
	_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(theirs)})
	unauthorized(t, err, "ec2:ReleaseAddress", theirARN)
	_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(ours), DryRun: aws.Bool(true)})
	wantStatus(t, err, "DryRunOperation", 412)
	_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String("eipalloc-0123456789abcdef0")})
	wantCode(t, err, "InvalidAllocationID.NotFound")
	for _, id := range []string{ours, aws.ToString(allocated.AllocationId)} {
		_, err = c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(id)})
		noErr(t, err)
	}
	if d, _ := e.admin.Dump(ctx); len(d.Addresses) != 1 || d.Addresses[0].AllocationID != theirs {
		t.Fatalf("after releasing the cluster's two: %+v", d.Addresses)
	}

	subnet := e.subnetByName("pods").SubnetId
	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: subnet,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{{Key: aws.String("enipam.io/cluster"), Value: aws.String("prod-1")}}}}})
	noErr(t, err)
	eni := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
	eniARN := "arn:aws:ec2:us-east-1:123456789012:network-interface/" + eni
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{eni}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	unauthorized(t, err, "ec2:CreateTags", eniARN)
	_, err = c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{eni}})
	unauthorized(t, err, "ec2:DeleteTags", eniARN)
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: subnet, DryRun: aws.Bool(true)})
	wantStatus(t, err, "DryRunOperation", 412)

	node := e.instanceByName("node")
	att, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni), InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId, DryRun: aws.Bool(true)})
	// The cluster's ENI: consolidation detaches it once emptied.
	wantStatus(t, err, "DryRunOperation", 412)
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni), DryRun: aws.Bool(true)})
	wantStatus(t, err, "DryRunOperation", 412)

	// An ENI of another tool (no cluster tag) can be neither detached nor
	// deleted.
	foreign, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: subnet})
	noErr(t, err)
	foreignID := aws.ToString(foreign.NetworkInterface.NetworkInterfaceId)
	foreignARN := "arn:aws:ec2:us-east-1:123456789012:network-interface/" + foreignID
	foreignAtt, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(foreignID), InstanceId: node.InstanceId, DeviceIndex: aws.Int32(2)})
	noErr(t, err)
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: foreignAtt.AttachmentId})
	unauthorized(t, err, "ec2:DetachNetworkInterface", foreignARN)
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(foreignID)})
	unauthorized(t, err, "ec2:DeleteNetworkInterface", foreignARN)
	if n := e.eni(foreignID); n.Attachment == nil {
		t.Errorf("a refused detach detached the foreign ENI")
	}
	_, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{DryRun: aws.Bool(true)})
	wantStatus(t, err, "DryRunOperation", 412)
	if n := e.eni(eni); len(n.TagSet) != 1 || n.Attachment == nil {
		t.Errorf("refused calls changed the ENI: tags %v attachment %v", n.TagSet, n.Attachment)
	}
}

// TestPrincipalsWithTheirOwnPolicies: a scenario with two principals,
// each held to its own policy: an explicit Deny with a wildcard action
// wins over an Allow of everything; a condition on the resource's tags
// (StringLike) and on the tag keys a request sets (ForAllValues) lets
// through only what matches. The other principal's key with the wrong
// secret is refused before any policy.
func TestPrincipalsWithTheirOwnPolicies(t *testing.T) {
	sc := scenario(t, policyScenario)
	sc.Principals = []ec2sim.PrincipalSpec{
		{Name: "ops", AccessKeyID: "AKIDOPS", SecretAccessKey: "ops-secret", PolicyDocument: []byte(`{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": "*", "Resource": "*"},
    {"Sid": "NoDeletes", "Effect": "Deny", "Action": "ec2:Delete*", "Resource": "arn:aws:ec2:*:*:network-interface/*"}
  ]}`)},
		{Name: "tagger", AccessKeyID: "AKIDTAGGER", SecretAccessKey: "tagger-secret", PolicyDocument: []byte(`{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"},
    {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "arn:aws:ec2:*:*:elastic-ip/*",
     "Condition": {"StringLike": {"aws:ResourceTag/enipam.io/cluster": "prod-*"},
                   "ForAllValues:StringEquals": {"aws:TagKeys": ["owner", "note"]}}}
  ]}`)},
	}
	e := newEnv(t, sc)
	ctx := e.ctx
	ops := e.newEC2ClientAs(1, "AKIDOPS", "ops-secret")
	tagger := e.newEC2ClientAs(1, "AKIDTAGGER", "tagger-secret")
	d, err := e.admin.Dump(ctx)
	noErr(t, err)
	ours, theirs := d.Addresses[0].AllocationID, d.Addresses[1].AllocationID

	subnets, err := ops.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	noErr(t, err)
	created, err := ops.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: subnets.Subnets[0].SubnetId})
	noErr(t, err)
	eni := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
	_, err = ops.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)})
	wantStatus(t, err, "UnauthorizedOperation", 403)
	var ae smithy.APIError
	errors.As(err, &ae)
	if f, _ := ec2sim.DecodeAuthorizationMessage(ae.ErrorMessage()); !f.ExplicitDeny || f.DeniedBy != "NoDeletes" || f.Principal != "arn:aws:iam::123456789012:user/ops" {
		t.Errorf("explicit deny reported as %+v", f)
	}

	tag := func(id string, keys ...string) error {
		var tags []types.Tag
		for _, k := range keys {
			tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String("x")})
		}
		_, err := tagger.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: tags})
		return err
	}
	noErr(t, tag(ours, "owner", "note"))
	wantStatus(t, tag(ours, "owner", "team"), "UnauthorizedOperation", 403)
	wantStatus(t, tag(theirs, "owner"), "UnauthorizedOperation", 403)
	wantStatus(t, tag(eni, "owner"), "UnauthorizedOperation", 403)
	_, err = tagger.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{})
	noErr(t, err)

	_, err = e.newEC2ClientAs(1, "AKIDOPS", "tagger-secret").DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	wantStatus(t, err, "SignatureDoesNotMatch", 403)
	_, err = e.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	wantStatus(t, err, "AuthFailure", 401) // the default key is no principal of this scenario
}

// TestScenarioPrincipalsFromYAML: principals are part of a scenario's
// YAML, their policy written in YAML as well as JSON; a principal that
// cannot be built is a scenario error naming its field.
func TestScenarioPrincipalsFromYAML(t *testing.T) {
	base := "account: \"123456789012\"\nregion: us-east-1\nzones: [us-east-1a]\nvpcs:\n- cidrs: [10.0.0.0/16]\n  subnets: [{cidr: 10.0.0.0/24, zone: us-east-1a}]\n"
	sc := scenario(t, base+`principals:
- name: reader
  accessKeyID: AKIDREADER
  secretAccessKey: s3cret
  policyDocument:
    Version: "2012-10-17"
    Statement:
    - {Effect: Allow, Action: "ec2:Describe*", Resource: "*"}
`)
	e := newEnv(t, sc)
	reader := e.newEC2ClientAs(1, "AKIDREADER", "s3cret")
	_, err := reader.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	noErr(t, err)
	_, err = reader.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	wantStatus(t, err, "UnauthorizedOperation", 403)

	for _, c := range []struct{ yaml, path string }{
		{"principals: [{accessKeyID: lower, secretAccessKey: s}]", "principals[0].accessKeyID"},
		{"principals: [{accessKeyID: AKIDA, secretAccessKey: s}, {accessKeyID: AKIDA, secretAccessKey: t}]", "principals[1].accessKeyID"},
		{"principals: [{accessKeyID: AKIDA}]", "principals[0].secretAccessKey"},
		{"principals: [{accessKeyID: AKIDA, secretAccessKey: s, policy: admin}]", "principals[0].policy"},
		{"principals: [{accessKeyID: AKIDA, secretAccessKey: s, policyDocument: {Version: '2012-10-17', Statement: {Effect: Allow, Action: '*', Resource: '*', Condition: {DateLessThan: {aws:CurrentTime: x}}}}}]", "principals[0].policyDocument"},
	} {
		_, err := ec2sim.ParseScenario([]byte(base + c.yaml + "\n"))
		var se *ec2sim.ScenarioError
		if !errors.As(err, &se) || se.Path != c.path {
			t.Errorf("%s: %v, want an error at %s", c.yaml, err, c.path)
		}
	}
}
