package fieldowners

import (
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAdoptionMovesOnlyTheRoots: an object an earlier operator created
// (its spec, a label, a finalizer, by Update) and its agent patched (the
// status subresource), now applied by enipam-operator. Adopting the spec
// and the finalizers moves those two into enipam-operator's Apply entry
// and leaves the label to the earlier writer; the status entry is
// untouched; a second adoption over the result finds nothing. The agent,
// which has not applied yet, gets the earlier agent's status only when
// its entry may be created.
func TestAdoptionMovesOnlyTheRoots(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, APIVersion: "enipam.io/v1alpha1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	obj := &metav1.ObjectMeta{ResourceVersion: "42", ManagedFields: []metav1.ManagedFieldsEntry{
		entry("earlier", metav1.ManagedFieldsOperationUpdate, "",
			`{"f:metadata":{"f:finalizers":{".":{},"v:\"enipam.io/node-static-ip\"":{}},"f:labels":{"f:team":{}}},"f:spec":{"f:instanceID":{},"f:excludeInterfaceTags":{"f:old":{}}}}`),
		entry("earlier-agent", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:routedIPs":{}}}`),
		entry("enipam-operator", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:instanceID":{},"f:capacity":{"f:maxIPs":{}}}}`),
	}}
	operator := Transfer{Manager: "enipam-operator", Roots: [][]string{{"f:spec"}, {"f:metadata", "f:finalizers"}}}
	patch, from, err := Adoption(obj, operator)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(from, []string{"earlier"}) {
		t.Errorf("adopted from %v, want [earlier]", from)
	}
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil || len(ops) != 2 || ops[1].Path != "/metadata/resourceVersion" || string(ops[1].Value) != `"42"` {
		t.Fatalf("patch %s (%v), want the managedFields and resourceVersion 42", patch, err)
	}
	var got []metav1.ManagedFieldsEntry
	if err := json.Unmarshal(ops[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, m := range got {
		fields[m.Manager+"/"+string(m.Operation)] = m.FieldsV1.GetRawString()
	}
	want := map[string]string{
		"earlier/Update":       `{"f:metadata":{"f:labels":{"f:team":{}}}}`,
		"earlier-agent/Update": `{"f:status":{"f:routedIPs":{}}}`,
		"enipam-operator/Apply": `{"f:metadata":{"f:finalizers":{".":{},"v:\"enipam.io/node-static-ip\"":{}}},` +
			`"f:spec":{"f:capacity":{"f:maxIPs":{}},"f:excludeInterfaceTags":{"f:old":{}},"f:instanceID":{}}}`,
	}
	if len(fields) != len(want) {
		t.Errorf("entries %v, want %v", fields, want)
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s owns %s, want %s", k, fields[k], v)
		}
	}

	obj.ManagedFields = got
	if patch, from, err := Adoption(obj, operator); err != nil || patch != nil || from != nil {
		t.Errorf("second adoption: %s from %v (%v), want nothing", patch, from, err)
	}
	agent := Transfer{Manager: "enipam-agent", Subresource: "status", Roots: [][]string{{"f:status"}}}
	if patch, _, err := Adoption(obj, agent); err != nil || patch != nil {
		t.Errorf("adoption without the applier's entry: %s (%v), want nothing", patch, err)
	}
	agent.Create = true
	patch, from, err = Adoption(obj, agent)
	if err != nil || !slices.Equal(from, []string{"earlier-agent"}) {
		t.Fatalf("adoption creating the agent's entry: from %v (%v), want earlier-agent", from, err)
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ops[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(got, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == "enipam-agent" })
	if len(got) != 3 || i < 0 || got[i].Operation != metav1.ManagedFieldsOperationApply || got[i].Subresource != "status" ||
		got[i].FieldsV1.GetRawString() != `{"f:status":{"f:routedIPs":{}}}` {
		t.Errorf("entries %+v, want earlier-agent's status as enipam-agent's apply", got)
	}
}
