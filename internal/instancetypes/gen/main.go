// Command gen writes the instance-type table of package instancetypes from
// the published data in its data directory (data/README.md names each
// source): the AWS VPC CNI's per-type interface limits, which also decide
// which types are current; Karpenter's trunking limits; and Karpenter's
// instance-type reference for vCPUs, memory, architecture and EFA.
//
//	go run ./gen -data data -out zz_generated.go
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Input files, in the data directory.
const (
	vpcCNILimits    = "vpc_ip_resource_limit.go.txt"
	karpenterTrunks = "karpenter_vpclimits.txt"
	karpenterDocs   = "karpenter_instance_types.md"
)

// noIPv6Families are the previous-generation families EC2 gives no IPv6:
// its user guide gives IPv6 to every current-generation type and, of the
// previous generation, to C3, R3 and I2 (and to the Xen types since, c4,
// m4, r4, t2, x1, ...); every other listed family has as many IPv6 as IPv4
// addresses per interface, as the guide's per-type table shows.
var noIPv6Families = []string{"c1", "cc2", "cg1", "cr1", "g2", "hi1", "hs1", "m1", "m2", "m3", "t1"}

type card struct{ index, maxENIs int }

type entry struct {
	name                   string
	cards                  []card
	defaultCard            int
	ipv4, ipv6             int
	hypervisor             string
	bareMetal              bool
	maxEFA                 int
	trunking               bool
	branches               int
	arch                   string
	archDerived            bool
	vcpus, memMiB          int
	fromDocs, fromTrunking bool
}

func main() {
	dataDir := flag.String("data", "data", "directory of the source data")
	out := flag.String("out", "zz_generated.go", "file to write")
	flag.Parse()
	src, err := generate(*dataDir)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func generate(dir string) ([]byte, error) {
	entries, err := readVPCCNI(filepath.Join(dir, vpcCNILimits))
	if err != nil {
		return nil, err
	}
	byName := map[string]*entry{}
	for _, e := range entries {
		byName[e.name] = e
	}
	if err := readTrunking(filepath.Join(dir, karpenterTrunks), byName); err != nil {
		return nil, err
	}
	if err := readDocs(filepath.Join(dir, karpenterDocs), byName); err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range entries {
		derived := archByName(e.name)
		if e.arch == "" {
			e.arch, e.archDerived = derived, true
		} else if e.arch != derived {
			errs = append(errs, fmt.Errorf("%s: the reference says %s, the naming rule %s", e.name, e.arch, derived))
		}
		if !slices.Contains(noIPv6Families, family(e.name)) {
			e.ipv6 = e.ipv4
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return render(entries)
}

// readVPCCNI reads the VPC CNI's map instanceNetworkingLimits, whose
// entries are
//
//	"m5.large": {ENILimit: 3, IPv4Limit: 10, DefaultNetworkCardIndex: 0,
//		NetworkCards: []NetworkCard{{MaximumNetworkInterfaces: 3, NetworkCardIndex: 0}},
//		HypervisorType: "nitro", IsBareMetal: false},
//
// ENILimit being the default card's interfaces.
func readVPCCNI(path string) ([]*entry, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var lit *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "instanceNetworkingLimits" && len(vs.Values) == 1 {
			lit, _ = vs.Values[0].(*ast.CompositeLit)
		}
		return lit == nil
	})
	if lit == nil {
		return nil, fmt.Errorf("%s: no map instanceNetworkingLimits", path)
	}
	var out []*entry
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: an element is not key: value", path)
		}
		name, err := stringLit(kv.Key)
		if err != nil {
			return nil, err
		}
		e := &entry{name: name}
		fields, err := structFields(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		eniLimit := 0
		for key, v := range fields {
			switch key {
			case "ENILimit":
				eniLimit, err = intLit(v)
			case "IPv4Limit":
				e.ipv4, err = intLit(v)
			case "DefaultNetworkCardIndex":
				e.defaultCard, err = intLit(v)
			case "HypervisorType":
				e.hypervisor, err = stringLit(v)
			case "IsBareMetal":
				e.bareMetal, err = boolLit(v)
			case "NetworkCards":
				e.cards, err = cardsLit(v)
			default:
				err = fmt.Errorf("unknown field %s", key)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, key, err)
			}
		}
		switch e.hypervisor {
		case "nitro", "xen":
		case "unknown":
			e.hypervisor = ""
		default:
			return nil, fmt.Errorf("%s: hypervisor %q", name, e.hypervisor)
		}
		if err := checkCards(e, eniLimit); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if e.ipv4 < 1 {
			return nil, fmt.Errorf("%s: %d IPv4 addresses per interface", name, e.ipv4)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, fmt.Errorf("%s listed twice", out[i].name)
		}
	}
	return out, nil
}

// checkCards: indexes 0..n-1 in order, each card with an interface, and
// ENILimit the default card's.
func checkCards(e *entry, eniLimit int) error {
	if len(e.cards) == 0 {
		return errors.New("no network card")
	}
	for i, c := range e.cards {
		if c.index != i || c.maxENIs < 1 {
			return fmt.Errorf("network card %d: %+v", i, c)
		}
	}
	if e.defaultCard >= len(e.cards) || e.cards[e.defaultCard].maxENIs != eniLimit {
		return fmt.Errorf("ENILimit %d is not default card %d's interfaces (%v)", eniLimit, e.defaultCard, e.cards)
	}
	return nil
}

func structFields(x ast.Expr) (map[string]ast.Expr, error) {
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil, errors.New("not a composite literal")
	}
	out := map[string]ast.Expr{}
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			return nil, errors.New("a field without a name")
		}
		id, ok := kv.Key.(*ast.Ident)
		if !ok {
			return nil, errors.New("a field name is not an identifier")
		}
		out[id.Name] = kv.Value
	}
	return out, nil
}

func cardsLit(x ast.Expr) ([]card, error) {
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil, errors.New("not a slice literal")
	}
	var out []card
	for _, elt := range lit.Elts {
		fields, err := structFields(elt)
		if err != nil {
			return nil, err
		}
		var c card
		for key, v := range fields {
			switch key {
			case "MaximumNetworkInterfaces":
				c.maxENIs, err = intLit(v)
			case "NetworkCardIndex":
				c.index, err = intLit(v)
			default:
				err = fmt.Errorf("unknown field %s", key)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func stringLit(x ast.Expr) (string, error) {
	if b, ok := x.(*ast.BasicLit); ok && b.Kind == token.STRING {
		return strconv.Unquote(b.Value)
	}
	return "", fmt.Errorf("%T is not a string", x)
}

func intLit(x ast.Expr) (int, error) {
	if b, ok := x.(*ast.BasicLit); ok && b.Kind == token.INT {
		return strconv.Atoi(b.Value)
	}
	return 0, fmt.Errorf("%T is not an integer", x)
}

func boolLit(x ast.Expr) (bool, error) {
	if id, ok := x.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
		return id.Name == "true", nil
	}
	return false, fmt.Errorf("%T is not a boolean", x)
}

var (
	trunkName  = regexp.MustCompile(`^\t"([^"]+)": \{$`)
	trunkField = regexp.MustCompile(`^\t\t(IsTrunkingCompatible|BranchInterface):\s+(\S+),$`)
)

// readTrunking reads the lines of Karpenter's vpclimits kept in the data
// directory: a type's name line, then its IsTrunkingCompatible and
// BranchInterface lines. Types the VPC CNI does not list are skipped.
func readTrunking(path string, byName map[string]*entry) error {
	return eachLine(path, func(line string, cur *string) error {
		if m := trunkName.FindStringSubmatch(line); m != nil {
			*cur = m[1]
			return nil
		}
		m := trunkField.FindStringSubmatch(line)
		if m == nil || *cur == "" {
			return fmt.Errorf("unexpected line %q", line)
		}
		e := byName[*cur]
		if e == nil {
			return nil
		}
		e.fromTrunking = true
		var err error
		if m[1] == "IsTrunkingCompatible" {
			e.trunking, err = strconv.ParseBool(m[2])
		} else {
			e.branches, err = strconv.Atoi(m[2])
		}
		return err
	})
}

var (
	docsName = regexp.MustCompile("^### `([^`]+)`$")
	docsRow  = regexp.MustCompile(`^ \|([a-z0-9./-]+)\|([^|]*)\|$`)
)

// readDocs reads the rows of Karpenter's instance-type reference kept in
// the data directory: a type's heading, then its instance-cpu,
// instance-memory (MiB) and kubernetes.io/arch labels and its
// vpc.amazonaws.com/efa resource (EFA interfaces; absent without EFA).
func readDocs(path string, byName map[string]*entry) error {
	return eachLine(path, func(line string, cur *string) error {
		if m := docsName.FindStringSubmatch(line); m != nil {
			*cur = m[1]
			if byName[*cur] == nil {
				return fmt.Errorf("%s is not in the VPC CNI's table", *cur)
			}
			byName[*cur].fromDocs = true
			return nil
		}
		m := docsRow.FindStringSubmatch(line)
		if m == nil || *cur == "" {
			return fmt.Errorf("unexpected line %q", line)
		}
		e := byName[*cur]
		var err error
		switch m[1] {
		case "karpenter.k8s.aws/instance-cpu":
			e.vcpus, err = strconv.Atoi(m[2])
		case "karpenter.k8s.aws/instance-memory":
			e.memMiB, err = strconv.Atoi(m[2])
		case "vpc.amazonaws.com/efa":
			e.maxEFA, err = strconv.Atoi(m[2])
		case "kubernetes.io/arch":
			switch m[2] {
			case "amd64":
				e.arch = "x86_64"
			case "arm64":
				e.arch = "arm64"
			default:
				err = fmt.Errorf("architecture %q", m[2])
			}
		default:
			err = fmt.Errorf("row %s", m[1])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", *cur, err)
		}
		return nil
	})
}

func eachLine(path string, f func(line string, cur *string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	cur, n := "", 0
	for sc.Scan() {
		n++
		if err := f(sc.Text(), &cur); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// family is the part of a type's name before the dot.
func family(name string) string {
	f, _, _ := strings.Cut(name, ".")
	return f
}

// familyParts splits a family into its series letters, generation and
// attribute letters: "c7gn" is c, 7, "gn"; "u7in-16tb" u, 7, "in-16tb".
var familyParts = regexp.MustCompile(`^([a-z]+)(\d+)(.*)$`)

// archByName is the architecture a type's name says: Apple silicon for
// mac2 and the mac-m families, Intel for mac1; Graviton (arm64) for a1
// and for a family whose attribute letters after the generation carry a
// g (m6g, c7gn, r8gd, x2gd, im4gn, is4gen, t4g, g5g, hpc7g, c8gb), except
// letters after a dash (u7in-16tb's "16tb"); x86_64 otherwise. gen checks
// it against every type Karpenter's reference names an architecture for.
func archByName(name string) string {
	f := family(name)
	switch {
	case f == "mac1":
		return "x86_64_mac"
	case strings.HasPrefix(f, "mac"):
		return "arm64_mac"
	case f == "a1":
		return "arm64"
	}
	m := familyParts.FindStringSubmatch(f)
	if m == nil {
		return "x86_64"
	}
	attrs, _, _ := strings.Cut(m[3], "-")
	if strings.Contains(attrs, "g") {
		return "arm64"
	}
	return "x86_64"
}

func render(entries []*entry) ([]byte, error) {
	var b bytes.Buffer
	fromDocs, derived, trunks := 0, 0, 0
	for _, e := range entries {
		if e.fromDocs {
			fromDocs++
		}
		if e.archDerived {
			derived++
		}
		if e.fromTrunking {
			trunks++
		}
	}
	fmt.Fprintf(&b, `// Code generated by go run ./gen; DO NOT EDIT.
// Sources: data/README.md. %d types; %d with vCPUs, memory, EFA and
// architecture from Karpenter's reference, %d with the architecture their
// name says; %d with trunking limits.

package instancetypes

var table = []Type{
`, len(entries), fromDocs, derived, trunks)
	for _, e := range entries {
		fmt.Fprintf(&b, "\t{Name: %q, NetworkCards: []NetworkCard{", e.name)
		for i, c := range e.cards {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{%d, %d}", c.index, c.maxENIs)
		}
		fmt.Fprintf(&b, "}, DefaultNetworkCard: %d, IPv4PerENI: %d, IPv6PerENI: %d, Hypervisor: %q, BareMetal: %v, MaxEFA: %d, Trunking: %v, BranchInterfaces: %d, Architecture: %q, VCPUs: %d, MemoryMiB: %d},\n",
			e.defaultCard, e.ipv4, e.ipv6, e.hypervisor, e.bareMetal, e.maxEFA, e.trunking, e.branches, e.arch, e.vcpus, e.memMiB)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
