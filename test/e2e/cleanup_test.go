package e2e

import (
	"context"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// cleanupAPI deletes what a test created, once its operator stopped.
func cleanupAPI() {
	ctx := context.Background()
	c := env.Client
	_ = c.DeleteAllOf(ctx, &ciliumv2.CiliumNode{})
	_ = c.DeleteAllOf(ctx, &corev1.Node{})
	_ = c.DeleteAllOf(ctx, &enipamv1alpha1.ENIPolicy{})
	_ = c.DeleteAllOf(ctx, &eventsv1.Event{}, client.InNamespace("default"))
}
