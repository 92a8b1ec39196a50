package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"
)

// AddDNAT stands in for kube-proxy in tests: in an nf_tables table of its
// own (ip enipam-test-nat) it DNATs TCP to dst onto to, with the nat
// chains at prerouting and postrouting that connection tracking needs to
// undo it on replies.
func AddDNAT(k *Kernel, dst, to netip.AddrPort) error {
	c, err := k.openNFT()
	if err != nil {
		return err
	}
	defer c.close()
	const table = "enipam-test-nat"
	chain := func(name string, hook uint32, prio int32) nftMsg {
		return nftMsg{typ: unix.NFT_MSG_NEWCHAIN, flags: unix.NLM_F_CREATE, attrs: concat(
			nlaString(unix.NFTA_CHAIN_TABLE, table),
			nlaString(unix.NFTA_CHAIN_NAME, name),
			nlaNested(unix.NFTA_CHAIN_HOOK, nlaBE32(unix.NFTA_HOOK_HOOKNUM, hook), nlaBE32(unix.NFTA_HOOK_PRIORITY, nftPriority(prio))),
			nlaString(unix.NFTA_CHAIN_TYPE, "nat"),
		)}
	}
	payload := func(base, offset, length uint32) []byte {
		return nftExpr("payload",
			nlaBE32(unix.NFTA_PAYLOAD_DREG, unix.NFT_REG_1),
			nlaBE32(unix.NFTA_PAYLOAD_BASE, base),
			nlaBE32(unix.NFTA_PAYLOAD_OFFSET, offset),
			nlaBE32(unix.NFTA_PAYLOAD_LEN, length))
	}
	immediate := func(reg uint32, v []byte) []byte {
		return nftExpr("immediate", nlaBE32(unix.NFTA_IMMEDIATE_DREG, reg), nftData(unix.NFTA_IMMEDIATE_DATA, v))
	}
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	dst4, to4 := dst.Addr().As4(), to.Addr().As4()
	rule := [][]byte{
		payload(unix.NFT_PAYLOAD_NETWORK_HEADER, 16, 4),
		exprCmp(unix.NFT_CMP_EQ, dst4[:]),
		exprMetaLoad(unix.NFT_META_L4PROTO),
		exprCmp(unix.NFT_CMP_EQ, []byte{unix.IPPROTO_TCP}),
		payload(unix.NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2),
		exprCmp(unix.NFT_CMP_EQ, port(dst.Port())),
		immediate(unix.NFT_REG_1, to4[:]),
		immediate(unix.NFT_REG_1+1, port(to.Port())),
		nftExpr("nat",
			nlaBE32(unix.NFTA_NAT_TYPE, unix.NFT_NAT_DNAT),
			nlaBE32(unix.NFTA_NAT_FAMILY, unix.NFPROTO_IPV4),
			nlaBE32(unix.NFTA_NAT_REG_ADDR_MIN, unix.NFT_REG_1),
			nlaBE32(unix.NFTA_NAT_REG_PROTO_MIN, unix.NFT_REG_1+1)),
	}
	return c.transact(unix.NFPROTO_IPV4, []nftMsg{
		{typ: unix.NFT_MSG_NEWTABLE, flags: unix.NLM_F_CREATE, attrs: nlaString(unix.NFTA_TABLE_NAME, table)},
		chain("prerouting", unix.NF_INET_PRE_ROUTING, -100),
		chain("postrouting", unix.NF_INET_POST_ROUTING, 100),
		{typ: unix.NFT_MSG_NEWRULE, flags: unix.NLM_F_CREATE | unix.NLM_F_APPEND, attrs: concat(
			nlaString(unix.NFTA_RULE_TABLE, table),
			nlaString(unix.NFTA_RULE_CHAIN, "prerouting"),
			nlaNested(unix.NFTA_RULE_EXPRESSIONS, rule...),
		)},
	})
}

// NFTRuleset lists every nf_tables table, chain and rule of k's namespace,
// one line each with its attributes in raw form (handles left out), for
// tests that compare the whole ruleset before and after; it stands in for
// `nft list ruleset`, which needs a binary these machines may lack.
func NFTRuleset(k *Kernel) ([]string, error) {
	c, err := k.openNFT()
	if err != nil {
		return nil, err
	}
	defer c.close()
	var out []string
	for _, q := range []struct {
		kind string
		typ  uint16
		keep []uint16
	}{
		{"table", unix.NFT_MSG_GETTABLE, []uint16{unix.NFTA_TABLE_NAME, unix.NFTA_TABLE_FLAGS}},
		{"chain", unix.NFT_MSG_GETCHAIN, []uint16{unix.NFTA_CHAIN_TABLE, unix.NFTA_CHAIN_NAME, unix.NFTA_CHAIN_HOOK, unix.NFTA_CHAIN_POLICY, unix.NFTA_CHAIN_TYPE}},
		{"rule", unix.NFT_MSG_GETRULE, []uint16{unix.NFTA_RULE_TABLE, unix.NFTA_RULE_CHAIN, unix.NFTA_RULE_EXPRESSIONS, unix.NFTA_RULE_USERDATA}},
	} {
		msgs, err := c.dump(unix.NFPROTO_UNSPEC, nftMsg{typ: q.typ})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			attrs := parseAttrs(m)
			line := q.kind
			for _, a := range q.keep {
				line += fmt.Sprintf(" %d=%x", a, attrs[a])
			}
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out, nil
}
