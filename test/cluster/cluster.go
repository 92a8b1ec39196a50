// Package cluster gives tests a real Kubernetes control plane: etcd and
// kube-apiserver built from source by `make tools` (hack/tools.sh), started
// through controller-runtime's envtest on free ports, with Cilium's own
// CiliumNode CRD and enipam's CRDs installed.
//
// One control plane serves a whole test package: call Main from TestMain
// and reach it through the returned *Cluster. The processes' output is kept
// in files and the tail of each is printed when the package fails, so an
// apiserver complaint is never lost.
package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/crds"
)

// KubernetesVersion is the version `make tools` builds into
// bin/k8s/<version>/; keep it in step with hack/tools.sh.
const KubernetesVersion = "1.37.1"

// Cluster is a running control plane.
type Cluster struct {
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with Scheme that can also watch.
	Client client.WithWatch
	// Scheme knows core Kubernetes, Cilium v2 and enipam types.
	Scheme *runtime.Scheme
	// BinDir holds kube-apiserver, etcd, kubectl and kube-scheduler.
	BinDir string
	// LogDir holds etcd.log and kube-apiserver.log.
	LogDir string

	env *envtest.Environment
}

// NewScheme returns a scheme with the core Kubernetes types, Cilium's v2
// types and enipam's types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		ciliumv2.AddToScheme,
		enipamv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CRDs returns the CRDs every control plane gets: Cilium's CiliumNode CRD,
// exactly as embedded in the Cilium module, and enipam's own.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	cn, err := CiliumNodeCRD()
	if err != nil {
		return nil, err
	}
	own, err := crds.All()
	if err != nil {
		return nil, fmt.Errorf("loading enipam CRDs, %w", err)
	}
	return append([]*apiextensionsv1.CustomResourceDefinition{cn}, own...), nil
}

// ciliumNodeCRDPath is where the Cilium module keeps the CiliumNode CRD it
// embeds into its own binaries.
const ciliumNodeCRDPath = "pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnodes.yaml"

// CiliumNodeCRD reads the CiliumNode CRD from the Cilium module this
// repository builds against (the version in go.mod), so tests run against
// exactly the schema Cilium installs. Cilium's own accessor package does not
// build with the client-go enipam uses, hence the file.
func CiliumNodeCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cilium/cilium")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("locating the cilium module (go list -m), %w", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), ciliumNodeCRDPath)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Cilium's CiliumNode CRD, %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("decoding %s, %w", path, err)
	}
	return crd, nil
}

// Start builds nothing: it expects the binaries of `make tools` (or
// $KUBEBUILDER_ASSETS) and starts etcd and kube-apiserver with the CRDs
// installed. The caller must Stop it.
func Start() (*Cluster, error) {
	binDir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	defs, err := CRDs()
	if err != nil {
		return nil, err
	}
	logDir, err := os.MkdirTemp("", "enipam-cluster-")
	if err != nil {
		return nil, err
	}
	etcdLog, err := os.Create(filepath.Join(logDir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	apiLog, err := os.Create(filepath.Join(logDir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		Scheme:                   scheme,
		CRDs:                     defs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{Out: etcdLog, Err: etcdLog},
			APIServer: &envtest.APIServer{Out: apiLog, Err: apiLog},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		printLogs(logDir)
		return nil, fmt.Errorf("starting control plane from %s, %w", binDir, err)
	}
	// The first requests for a fresh CRD can be answered 429 while the
	// apiserver's caches warm; a generous client limit keeps tests fast.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Cluster{Config: cfg, Client: c, Scheme: scheme, BinDir: binDir, LogDir: logDir, env: env}, nil
}

// Stop stops kube-apiserver, then etcd (the other order hangs the
// apiserver), and removes the logs unless keepLogs is set.
func (c *Cluster) Stop(keepLogs bool) error {
	err := c.env.Stop()
	if !keepLogs && err == nil {
		_ = os.RemoveAll(c.LogDir)
	}
	return err
}

// KubeConfig returns a kubeconfig for a cluster admin, for processes
// started by tests (the operator binary, kubectl).
func (c *Cluster) KubeConfig() ([]byte, error) {
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: "enipam-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// AddUser returns a rest.Config for a user with the given name and groups
// and no other rights, for RBAC tests.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// Main runs a test package against one shared control plane: it starts the
// control plane, hands it to use (which typically stores it in a package
// variable), runs the tests, prints the control-plane logs if any test
// failed, and stops everything. Use it as the body of TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c })) }
func Main(m interface{ Run() int }, use func(*Cluster)) int {
	// controller-runtime's global logger (envtest, clients without one of
	// their own) goes to stderr, shown with the failures of `go test`.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		return 1
	}
	use(c)
	code := m.Run()
	if code != 0 {
		printLogs(c.LogDir)
	}
	if err := c.Stop(code != 0); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// BinaryDir finds the directory with kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS if set, else bin/k8s/<version> of the enclosing
// repository.
func BinaryDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", KubernetesVersion)
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make tools` (builds the control plane from source once)", name, dir)
		}
	}
	return dir, nil
}

// RepoRoot returns the directory of the enclosing go.mod, found from the
// working directory upwards (go test runs in the package's directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/enipam/enipam\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no enipam go.mod above the working directory")
		}
		dir = parent
	}
}

// FreeAddr returns a 127.0.0.1 address nothing listens on, for a server a
// test or the demo starts.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreeAddrs returns n distinct 127.0.0.1 addresses nothing listens on, for
// servers that start together: each is held until all are picked, since
// the kernel may hand a port just closed out again at once.
func FreeAddrs(n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// printLogs prints the last lines of each control-plane log, and where the
// whole files are.
func printLogs(dir string) {
	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fmt.Fprintf(os.Stderr, "---- last lines of %s ----\n%s\n", path, tail(data, 60))
	}
}

func tail(data []byte, lines int) []byte {
	i := len(data)
	for n := 0; n <= lines && i > 0; {
		i--
		if data[i] == '\n' {
			n++
		}
	}
	if i > 0 {
		i++
	}
	return data[i:]
}
