package cloud

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestENIEqualSeesEveryField: two ENIs that differ in any one field, a
// field added later included, are not Equal; a clone is. The inventory
// keeps its own entry for an ENI a describe shows Equal, so a field Equal
// missed would keep a stale value.
func TestENIEqualSeesEveryField(t *testing.T) {
	base := ENI{
		ID: "eni-1", MAC: "02:00:00:00:00:01", Description: "d", SubnetID: "subnet-1", VPCID: "vpc-1", AZ: "us-east-1a",
		Status: ENIInUse, InstanceID: "i-1", DeviceIndex: 1, AttachmentID: "eni-attach-1", DeleteOnTermination: true,
		AttachmentStatus: AttachmentAttached, PrimaryIP: netip.MustParseAddr("10.0.0.1"),
		IPs:      []netip.Addr{netip.MustParseAddr("10.0.0.2")},
		Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/28")}, IPv6s: []netip.Addr{netip.MustParseAddr("2001:db8::1")},
		IPv6Prefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/80")}, SecurityGroups: []string{"sg-1"},
		Tags: map[string]string{"k": "v"}, RequesterManaged: true, InterfaceType: "interface", NetworkCard: 1,
	}
	clone := base.Clone()
	if !base.Equal(&clone) {
		t.Fatal("an ENI is not Equal to its clone")
	}
	empty := ENI{IPs: []netip.Addr{}, Tags: map[string]string{}}
	if !(&ENI{}).Equal(&empty) {
		t.Error("nil and empty lists and maps are not Equal")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		other := base.Clone()
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Struct:
			f.Set(reflect.Zero(f.Type()))
		default:
			t.Fatalf("field %s: kind %v not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
		if base.Equal(&other) {
			t.Errorf("ENIs differing in %s are Equal", v.Type().Field(i).Name)
		}
	}
}

// TestInstanceEqualSeesEveryField: two instances that differ in any one
// field, a field added later included, are not Equal. The inventory
// keeps its own entry for an instance a describe shows Equal, so a field
// Equal missed would keep a stale value (a terminated instance served).
func TestInstanceEqualSeesEveryField(t *testing.T) {
	base := Instance{ID: "i-1", Type: "m5.large", AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-1",
		PrivateIP: netip.MustParseAddr("10.0.0.1"), State: "running", Tags: map[string]string{"k": "v"}}
	same := base
	same.Tags = map[string]string{"k": "v"}
	if !base.Equal(&same) {
		t.Fatal("an instance is not Equal to its copy")
	}
	if !(&Instance{}).Equal(&Instance{Tags: map[string]string{}}) {
		t.Error("nil and empty tags are not Equal")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		other := base
		other.Tags = map[string]string{"k": "v"}
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Map:
			other.Tags["k"] = "w"
		case reflect.Struct: // netip.Addr
			f.Set(reflect.ValueOf(netip.MustParseAddr("10.0.0.2")))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", v.Type().Field(i).Name, f.Kind())
		}
		if base.Equal(&other) {
			t.Errorf("instances differing in %s are Equal", v.Type().Field(i).Name)
		}
	}
}
