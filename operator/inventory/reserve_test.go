package inventory

import (
	"testing"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// TestReservableIsWhatReserveTakes: three Elastic IPs carry role=egress,
// eipalloc-1 associated, eipalloc-2 and -3 free. Reservable names what
// Reserve would take without taking it (eipalloc-2, while another holder
// has none reserved); ReserveID takes a named free address once, for one
// holder, and refuses one another holder reserved or that is associated.
func TestReservableIsWhatReserveTakes(t *testing.T) {
	a := newAddresses(nil, time.Hour, time.Second, time.Now, func() time.Time { return time.Time{} })
	tags := map[string]string{"role": "egress"}
	a.byID["eipalloc-1"] = cloud.Address{AllocationID: "eipalloc-1", Tags: tags, AssociationID: "eipassoc-1"}
	a.byID["eipalloc-2"] = cloud.Address{AllocationID: "eipalloc-2", Tags: tags}
	a.byID["eipalloc-3"] = cloud.Address{AllocationID: "eipalloc-3", Tags: tags}

	if got, ok := a.Reservable("n1", tags); !ok || got.AllocationID != "eipalloc-2" {
		t.Fatalf("Reservable(n1) = %s, %v; want eipalloc-2", got.AllocationID, ok)
	}
	if got, ok := a.Reservable("n2", tags); !ok || got.AllocationID != "eipalloc-2" {
		t.Fatalf("Reservable(n2) = %s, %v; want eipalloc-2: nothing reserved yet", got.AllocationID, ok)
	}
	if !a.ReserveID("n1", "eipalloc-2") {
		t.Fatal("ReserveID(n1, eipalloc-2) refused a free address")
	}
	if a.ReserveID("n2", "eipalloc-2") {
		t.Fatal("ReserveID(n2, eipalloc-2) took n1's reservation")
	}
	if a.ReserveID("n2", "eipalloc-1") {
		t.Fatal("ReserveID(n2, eipalloc-1) took an associated address")
	}
	if got, ok := a.Reservable("n2", tags); !ok || got.AllocationID != "eipalloc-3" {
		t.Fatalf("Reservable(n2) = %s, %v; want eipalloc-3, past n1's reservation", got.AllocationID, ok)
	}
	if got, ok := a.Reserve("n2", tags); !ok || got.AllocationID != "eipalloc-3" {
		t.Fatalf("Reserve(n2) = %s, %v; want eipalloc-3, as Reservable said", got.AllocationID, ok)
	}
	if _, ok := a.Reservable("n3", tags); ok {
		t.Fatal("Reservable(n3) found an address with every free one reserved")
	}
	if got, ok := a.Reservable("n1", tags); !ok || got.AllocationID != "eipalloc-2" {
		t.Fatalf("Reservable(n1) = %s, %v; want its own eipalloc-2", got.AllocationID, ok)
	}
}
