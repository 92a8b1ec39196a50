package operator

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claimcontroller"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/demand"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/operator/gc"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/poolcontroller"
)

// Operator is a wired enipam-operator; Run starts it.
//
// Every replica runs the outer manager: the informer caches, the pod
// watch, the metrics and probe endpoints, and the leader election. What
// acts (the EC2 client, the inventory, the controllers, the collector)
// runs in a term (term.go) only while the replica holds the Lease; a
// replica that loses it stops acting and stands by for the Lease again
// instead of exiting.
type Operator struct {
	mgr  manager.Manager
	opts Options
	// build builds the components of a term on a manager of their own.
	build func() (*term, error)
	// next is the term the replica runs when it next leads.
	next    *term
	elected chan struct{}
	log     *slog.Logger
	// Inventory is the first term's, exposed for tests and diagnostics.
	Inventory *inventory.Inventory
	// onTerm, when set, is told when a term starts acting and when it has
	// stopped (every controller returned): for tests that hold replicas to
	// one acting leader.
	onTerm func(acting bool)
}

// Scheme returns the types the operator reads and writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ciliumv2.AddToScheme, enipamv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New wires the operator. reg receives every metric (the command passes
// controller-runtime's registry, which the metrics endpoint serves); the
// collectors of a term leave it when the term ends, and the next term's
// take their place.
func New(opts Options, restCfg *rest.Config, awsCfg aws.Config, reg prometheus.Registerer, log *slog.Logger) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(log.Handler()),
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddress},
		HealthProbeBindAddress: opts.HealthAddress,
		PprofBindAddress:       opts.PprofAddress,
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Nodes are large; the operator needs their labels and
				// providerID only.
				&corev1.Node{}: {Transform: slimNode},
				// Their repeated strings and lists share one copy, and
				// their lists lose the decoder's slack (intern.go,
				// slim.go).
				&ciliumv2.CiliumNode{}:        {Transform: slimCiliumNode},
				&enipamv1alpha1.NodeRouting{}: {Transform: slimNodeRouting},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager, %w", err)
	}
	if err := claims.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	var relay *demandRelay
	if opts.PodDemand {
		w, err := newDemandWatch(restCfg, scheme, log.With("component", "demand"))
		if err != nil {
			return nil, err
		}
		// Every replica watches, so a new leader knows the pods waiting
		// and the arrivals of the last minutes at once.
		if err := mgr.Add(everyReplica(w.Start)); err != nil {
			return nil, err
		}
		relay = &demandRelay{Watch: w}
		w.OnChange(relay.fire)
	}
	o := &Operator{mgr: mgr, opts: opts, elected: make(chan struct{}), log: log}
	o.build = func() (*term, error) { return newTerm(opts, restCfg, awsCfg, mgr, reg, relay, log) }
	// The first term is built now, so that a bad configuration fails
	// here and every metric is registered from the start.
	if o.next, err = o.build(); err != nil {
		return nil, err
	}
	o.Inventory = o.next.inv
	if err := mgr.Add(everyReplica(o.lead)); err != nil {
		return nil, err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return o, nil
}

// newTerm builds what acts for one term: the EC2 client, the inventory,
// the pool and claim controllers, the policy status and the collector,
// on a manager that shares outer's cache, client transport and REST
// mapper (building it asks the apiserver nothing, so a replica that lost
// its Lease in an outage builds its next term at once). Its collectors go
// to reg through a termRegisterer.
func newTerm(opts Options, restCfg *rest.Config, awsCfg aws.Config, outer manager.Manager, reg prometheus.Registerer, relay *demandRelay, log *slog.Logger) (*term, error) {
	shared := sharedCache{outer.GetCache()}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  outer.GetScheme(),
		Logger:                  logr.FromSlogHandler(log.Handler()),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Controller:              config.Controller{SkipNameValidation: ptr(true)},
		GracefulShutdownTimeout: ptr(termStopGrace),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return outer.GetRESTMapper(), nil
		},
		NewCache: func(*rest.Config, cache.Options) (cache.Cache, error) { return shared, nil },
	})
	if err != nil {
		return nil, fmt.Errorf("creating the term's manager, %w", err)
	}
	t := &term{mgr: mgr, reg: &termRegisterer{reg: reg}}
	if relay != nil {
		t.demand = relay.term()
	}
	if err := t.wire(opts, awsCfg, log); err != nil {
		t.reg.release()
		return nil, err
	}
	return t, nil
}

// wire builds the term's components on its manager.
func (t *term) wire(opts Options, awsCfg aws.Config, log *slog.Logger) error {
	mgr, reg := t.mgr, t.reg
	ec2Opts := ec2.DefaultOptions()
	ec2Opts.Endpoint, ec2Opts.RateScale, ec2Opts.MaxAttempts = opts.EC2Endpoint, opts.EC2RateScale, opts.EC2MaxAttempts
	api, err := ec2.New(awsCfg, ec2Opts, reg)
	if err != nil {
		return err
	}
	inv := inventory.New(api, inventory.Options{
		VPCIDs:           opts.VPCIDs,
		ResyncInterval:   opts.ResyncInterval,
		ConsistencyGrace: min(opts.ResyncInterval, 2*time.Minute),
		NotFoundRetry:    30 * time.Second,
		// A first sync that finds ENIs of this cluster means a
		// predecessor (a crashed process, the leader this replica
		// replaces, this replica's own last term) may have drained the
		// account's buckets: ramp up from empty. A new cluster keeps
		// EC2's burst for its first scale-up.
		OnSynced: func(inv *inventory.Inventory) {
			fill := 1.0
			if inv.HasTagged(cloud.TagCluster, opts.ClusterName) {
				fill = 0
			}
			api.SetInitialBucketFill(fill)
			log.Info("EC2 client buckets primed", "initialFill", fill)
		},
	}, log.With("component", "inventory"))
	t.inv = inv
	if err := reg.Register(inv); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(inv.Start)); err != nil {
		return err
	}
	metrics, err := poolcontroller.NewMetrics(reg)
	if err != nil {
		return err
	}
	var podDemand poolcontroller.Demand
	if t.demand != nil {
		podDemand = t.demand
	}
	// The two controllers meet through the claims' status.placement; a
	// note left by an earlier term (a process gone, a lost lease) is
	// not acted on.
	term := rand.Text()
	nodes := poolcontroller.New(mgr.GetClient(), api, inv, mgr.GetEventRecorder("enipam-operator"), metrics, poolcontroller.Options{
		Cluster: opts.ClusterName,
		Term:    term,
		Pods:    mgr.GetAPIReader(),
		Workers: opts.Workers,
		Defaults: policy.Defaults{
			Knobs: opts.Knobs, FirstInterfaceIndex: opts.FirstInterfaceIndex, PrefixDelegation: opts.PrefixDelegation,
			ReleaseExcessIPs: opts.ReleaseExcessIPs, ReleaseDelay: opts.ReleaseDelay,
			Consolidation: opts.Consolidation,
			Adaptive:      opts.Headroom == string(enipamv1alpha1.HeadroomAdaptive),
		},
		Demand:           podDemand,
		NewENITokens:     api.NewENITokens,
		ConsistencyGrace: min(opts.ResyncInterval, 2*time.Minute),
		RoutingPatience:  opts.RoutingPatience,
		RetryBase:        time.Second,
		RetryMax:         2 * time.Minute,
		BlockedRetry:     opts.ResyncInterval,
	}, log.With("component", "ciliumnode"))
	if err := reg.Register(nodes); err != nil {
		return err
	}
	if err := nodes.SetupWithManager(mgr); err != nil {
		return err
	}
	claims := claimcontroller.New(mgr.GetClient(), api, inv, mgr.GetEventRecorder("enipam-operator"),
		claimcontroller.Options{Cluster: opts.ClusterName, Pods: mgr.GetAPIReader(), PublicIPRetry: opts.ResyncInterval, Term: term}, log.With("component", "staticipclaim"))
	if err := reg.Register(claims); err != nil {
		return err
	}
	if err := claims.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := policy.NewStatusReconciler(mgr.GetClient(), mgr.GetEventRecorder("enipam-operator")).WithFamilyProblems(nodes.FamilyProblems()).SetupWithManager(mgr); err != nil {
		return err
	}
	collector, err := gc.New(api, inv, mgr.GetClient(), gc.Options{
		Cluster: opts.ClusterName, Interval: opts.GCInterval, MaxPerPass: opts.GCMaxPerPass,
		MinAge: gcMinAge(opts),
	}, reg, log.With("component", "gc"))
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(collector.Start))
}

// Run runs the operator until ctx ends.
func (o *Operator) Run(ctx context.Context) error { return o.mgr.Start(ctx) }

// Elected is closed when this replica first leads (at once without
// leader election).
func (o *Operator) Elected() <-chan struct{} { return o.elected }

// newDemandWatch builds the pod watch on its own client: its field
// selector and slim cache are its own, apart from the manager's cache.
func newDemandWatch(restCfg *rest.Config, scheme *runtime.Scheme, log *slog.Logger) (*demand.Watch, error) {
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building the pod watch's client, %w", err)
	}
	return demand.New(c, demand.DefaultOptions(), log), nil
}

// everyReplica is a runnable that runs whether or not this replica leads.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// slimNode keeps what the operator reads of a Node.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: internLabels(n.Name, n.Labels),
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{ProviderID: n.Spec.ProviderID},
	}, nil
}

func ptr[T any](v T) *T { return &v }

// gcMinAge is --gc-min-age, or twice the consistency grace (at least a
// minute).
func gcMinAge(opts Options) time.Duration {
	if opts.GCMinAge > 0 {
		return opts.GCMinAge
	}
	return max(2*min(opts.ResyncInterval, 2*time.Minute), time.Minute)
}
