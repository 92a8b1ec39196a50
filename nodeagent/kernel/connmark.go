package kernel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/routing"
)

// enipam's nf_tables table (family ip) and its one chain. enipam owns the
// table whole: it is replaced or deleted as a unit and nothing else is
// ever touched.
const (
	NFTTable = "enipam"
	NFTChain = "prerouting"
	// nftPriorityMangle is iptables' mangle priority: after conntrack
	// (-200), before DNAT (-100) and the routing decision.
	nftPriorityMangle = -150
)

// Connmark implements routing.Host: it reads enipam's table (one lookup of
// the table, one dump of its rules). A table that is there but whose rules
// are not exactly the ones SetConnmark writes (edited or emptied by hand)
// is returned as an empty Connmark, which no desired state equals. A
// kernel without nf_tables has no table: nil.
func (k *Kernel) Connmark() (*routing.Connmark, error) {
	c, err := k.openNFT()
	if err != nil {
		return nil, err
	}
	defer c.close()
	if _, err := c.get(unix.NFPROTO_IPV4, nftMsg{typ: unix.NFT_MSG_GETTABLE, attrs: nlaString(unix.NFTA_TABLE_NAME, NFTTable)}); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading nf_tables table %s, %w", NFTTable, err)
	}
	rules, err := c.dump(unix.NFPROTO_IPV4, nftMsg{typ: unix.NFT_MSG_GETRULE, attrs: nlaString(unix.NFTA_RULE_TABLE, NFTTable)})
	if err != nil {
		return nil, fmt.Errorf("listing the rules of nf_tables table %s, %w", NFTTable, err)
	}
	var comments []string
	for _, r := range rules {
		attrs := parseAttrs(r)
		if strings.TrimRight(string(attrs[unix.NFTA_RULE_TABLE]), "\x00") != NFTTable {
			continue
		}
		comment, _ := parseNFTComment(attrs[unix.NFTA_RULE_USERDATA])
		comments = append(comments, comment)
	}
	return connmarkFromComments(comments), nil
}

// SetConnmark implements routing.Host: one transaction that deletes
// enipam's table with everything in it and, unless c is nil, creates it
// anew with c's chain and rules. Deleting a table that is not there is
// routing.ErrNotFound.
func (k *Kernel) SetConnmark(c *routing.Connmark) error {
	conn, err := k.openNFT()
	if err != nil {
		return err
	}
	defer conn.close()
	table := nlaString(unix.NFTA_TABLE_NAME, NFTTable)
	del := nftMsg{typ: unix.NFT_MSG_DELTABLE, attrs: table}
	if c == nil {
		return classify(conn.transact(unix.NFPROTO_IPV4, []nftMsg{del}))
	}
	if err := checkLinkName(c.Primary); err != nil || len(c.Primary) >= unix.IFNAMSIZ {
		return fmt.Errorf("invalid primary interface name %q", c.Primary)
	}
	// Creating the table first (a no-op when it exists) lets the delete
	// succeed either way, so the batch never depends on what was there.
	msgs := []nftMsg{
		{typ: unix.NFT_MSG_NEWTABLE, flags: unix.NLM_F_CREATE, attrs: table},
		del,
		{typ: unix.NFT_MSG_NEWTABLE, flags: unix.NLM_F_CREATE, attrs: table},
		{typ: unix.NFT_MSG_NEWCHAIN, flags: unix.NLM_F_CREATE, attrs: concat(
			nlaString(unix.NFTA_CHAIN_TABLE, NFTTable),
			nlaString(unix.NFTA_CHAIN_NAME, NFTChain),
			nlaNested(unix.NFTA_CHAIN_HOOK,
				nlaBE32(unix.NFTA_HOOK_HOOKNUM, unix.NF_INET_PRE_ROUTING),
				nlaBE32(unix.NFTA_HOOK_PRIORITY, nftPriority(nftPriorityMangle))),
			nlaString(unix.NFTA_CHAIN_TYPE, "filter"),
			nlaBE32(unix.NFTA_CHAIN_POLICY, nfAccept),
		)},
	}
	for i, r := range connmarkRules(c) {
		msgs = append(msgs, nftMsg{typ: unix.NFT_MSG_NEWRULE, flags: unix.NLM_F_CREATE | unix.NLM_F_APPEND, attrs: concat(
			nlaString(unix.NFTA_RULE_TABLE, NFTTable),
			nlaString(unix.NFTA_RULE_CHAIN, NFTChain),
			nlaNested(unix.NFTA_RULE_EXPRESSIONS, r...),
			nla(unix.NFTA_RULE_USERDATA, nftComment(connmarkComment(c, i))),
		)})
	}
	return classify(conn.transact(unix.NFPROTO_IPV4, msgs))
}

// connmarkRules are the expressions of the table's rules, in order:
//
//	iifname "<primary>" fib daddr . iif type local ct mark set ct mark | <mark>
//	iifname != "<primary>" ct mark & <mark> == <mark> meta mark set meta mark | <mark>
//
// Only the one bit changes in either mark: Cilium keeps its own bits in
// the packet mark.
func connmarkRules(c *routing.Connmark) [][][]byte {
	return [][][]byte{
		{
			exprMetaLoad(unix.NFT_META_IIFNAME),
			exprCmp(unix.NFT_CMP_EQ, ifname(c.Primary)),
			exprFibDaddrIifType(),
			exprCmp(unix.NFT_CMP_EQ, u32(unix.RTN_LOCAL)),
			exprCtLoad(unix.NFT_CT_MARK),
			exprBitwise32(^c.Mark, c.Mark),
			exprCtSet(unix.NFT_CT_MARK),
		},
		{
			exprMetaLoad(unix.NFT_META_IIFNAME),
			exprCmp(unix.NFT_CMP_NEQ, ifname(c.Primary)),
			exprCtLoad(unix.NFT_CT_MARK),
			exprBitwise32(c.Mark, 0),
			exprCmp(unix.NFT_CMP_EQ, u32(c.Mark)),
			exprMetaLoad(unix.NFT_META_MARK),
			exprBitwise32(^c.Mark, c.Mark),
			exprMetaSet(unix.NFT_META_MARK),
		},
	}
}

// connmarkComment is rule i's comment. It carries the rule's parameters in
// a fixed form, which is how Connmark recognises its own rules without
// decoding expressions:
//
//	enipam 1/2 mark 0x80 primary eth0: <what it does>
func connmarkComment(c *routing.Connmark, i int) string {
	what := [...]string{"mark connections to this node", "restore the mark on their replies"}[i]
	return fmt.Sprintf("enipam %d/2 mark %#x primary %s: %s", i+1, c.Mark, c.Primary, what)
}

// connmarkFromComments rebuilds the Connmark whose rules carry exactly
// these comments, or returns an empty one.
func connmarkFromComments(comments []string) *routing.Connmark {
	if len(comments) != 2 {
		return &routing.Connmark{}
	}
	f := strings.Fields(comments[0])
	if len(f) < 6 || f[0] != "enipam" || f[2] != "mark" || f[4] != "primary" {
		return &routing.Connmark{}
	}
	mark, err := strconv.ParseUint(f[3], 0, 32)
	if err != nil {
		return &routing.Connmark{}
	}
	c := &routing.Connmark{Primary: strings.TrimSuffix(f[5], ":"), Mark: uint32(mark)}
	for i, got := range comments {
		if got != connmarkComment(c, i) {
			return &routing.Connmark{}
		}
	}
	return c
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// nfAccept is the netfilter verdict NF_ACCEPT, the chain's policy.
const nfAccept = 1

// nftPriority encodes a signed hook priority as the kernel reads it.
func nftPriority(p int32) uint32 { return uint32(p) }
