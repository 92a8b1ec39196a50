// Package demo shows enipam at work on one machine, with nothing installed
// but Go and the tools of `make tools`: `make demo` runs it through
// cmd/enipam-demo.
//
// It builds enipam's binaries and ec2sim (cached in _out/demo/bin), starts
// etcd and kube-apiserver on free ports with Cilium's CiliumNode CRD and
// enipam's CRDs, and ec2sim with its built-in demo VPC (written to
// Options.Out with IPv6 CIDRs added: a /56 on the VPC, a /64 per subnet):
// 10.0.0.0/16 over two zones, node subnets, pod subnets and a pod security
// group tagged enipam.io/pods=true, and three instances of different types.
// It creates an ENIPolicy that puts pod IPs on secondary ENIs in the tagged
// subnets, and ENIPolicy dual-stack, the same with ipFamilies IPv4 and IPv6,
// for the t3.medium (labelled enipam.io/dual-stack=true); it joins the three
// instances as nodes (the Node the kubelet registers, the CiliumNode the
// cilium-agent creates), runs the real enipam-operator and a simulated
// cilium-agent per node (package agentsim; the t3.medium's in a Sim of its
// own with both families, as agentsim's families are per Sim) with a few
// pods each, waits until every pool is filled, and prints what a user would
// look at: `kubectl get ciliumnodes`, `kubectl get enipolicies`, a summary
// per node, the dual-stack node's IPv6 window (the /80 ec2sim shows on its
// primary ENI) with each of its pods' two addresses, and the KUBECONFIG
// line to explore the cluster.
//
// Then the static-IP part: simulated kubelets for the nodes, the real
// kube-scheduler with the chart's configuration and enipam's extender,
// and the real kube-controller-manager run StatefulSet db (one pod
// annotated enipam.io/static-ip and enipam.io/public-ip: allocate) in the
// zone with two nodes; its node is cordoned and its pod deleted, and the
// demo prints the pod's node and address before and after (the same
// address, on the other node's ENI, out of the old pool), its public IP
// (the same Elastic IP, which EC2 maps to the address on the new ENI),
// `kubectl get staticipclaims`, and the invariants again, the public IPs'
// included.
//
// It then keeps running until its context ends (Ctrl-C) and stops
// everything in order: kube-scheduler, kube-controller-manager, the
// operator, ec2sim, the agents, kube-apiserver, then etcd. With
// Options.Once (DEMO_ONCE=1) it stops as soon as it has printed.
//
// Its files live under Options.Out (_out/demo of the repository by
// default): the kubeconfig, logs/ with each process's log, and bin/ with
// the built binaries.
package demo
