package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// This file is a minimal nf_tables client over NETLINK_NETFILTER: enough to
// replace one table atomically (one batch is one kernel transaction) and to
// read back the comments of its rules. The module graph holds no nftables
// library, and shelling out to nft or iptables would need those tools in
// the agent's image and on every node.

// nftTimeout bounds every receive, so a kernel that never answers cannot
// hang the converge loop.
const nftTimeout = 5 * time.Second

// nftConn is one NETLINK_NETFILTER socket, opened inside the Kernel's
// namespace. A socket belongs to the namespace it was created in, so it can
// be used from any thread afterwards.
type nftConn struct {
	fd  int
	seq uint32
}

func (k *Kernel) openNFT() (*nftConn, error) {
	var fd int
	err := k.inNamespace(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening a netfilter netlink socket, %w", err)
	}
	c := &nftConn{fd: fd, seq: uint32(time.Now().UnixNano())}
	tv := unix.NsecToTimeval(nftTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		c.close()
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *nftConn) close() { _ = unix.Close(c.fd) }

// nftMsg is one nfnetlink message: its nf_tables type (NFT_MSG_*), flags
// beyond NLM_F_REQUEST, and attributes.
type nftMsg struct {
	typ   uint16
	flags uint16
	attrs []byte
}

// encode appends the message with header and nfgenmsg to b.
func (m nftMsg) encode(b []byte, typ uint16, family uint8, resID uint16, seq uint32) []byte {
	length := unix.NLMSG_HDRLEN + sizeofNfgenmsg + len(m.attrs)
	b = binary.NativeEndian.AppendUint32(b, uint32(length))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST|m.flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // port: the kernel's
	b = append(b, family, unix.NFNETLINK_V0)
	b = binary.BigEndian.AppendUint16(b, resID)
	b = append(b, m.attrs...)
	return b
}

func nftType(msg uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | msg }

// transact sends msgs as one batch, one transaction: the kernel applies all
// of them or none. Every message asks for an acknowledgement; the first
// error the kernel reports is returned, as a unix.Errno in the chain.
func (c *nftConn) transact(family uint8, msgs []nftMsg) error {
	var b []byte
	c.seq++
	b = nftMsg{}.encode(b, unix.NFNL_MSG_BATCH_BEGIN, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, c.seq)
	pending := map[uint32]bool{}
	for _, m := range msgs {
		c.seq++
		m.flags |= unix.NLM_F_ACK
		b = m.encode(b, nftType(m.typ), family, 0, c.seq)
		pending[c.seq] = true
	}
	c.seq++
	b = nftMsg{}.encode(b, unix.NFNL_MSG_BATCH_END, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, c.seq)
	if err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending nf_tables batch, %w", err)
	}
	for len(pending) > 0 {
		msgs, err := c.receive()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			delete(pending, m.Header.Seq)
			if errno := ackErrno(m.Data); errno != 0 {
				// After a failure the kernel aborts the whole batch; the
				// acknowledgements still owed are dropped with the socket.
				return fmt.Errorf("nf_tables transaction, %w", errno)
			}
		}
	}
	return nil
}

// dump sends one dump request and returns the attributes of every message
// of the answer (after its nfgenmsg).
func (c *nftConn) dump(family uint8, m nftMsg) ([][]byte, error) {
	c.seq++
	m.flags |= unix.NLM_F_DUMP
	if err := unix.Sendto(c.fd, m.encode(nil, nftType(m.typ), family, 0, c.seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sending nf_tables dump request, %w", err)
	}
	var out [][]byte
	for {
		msgs, err := c.receive()
		if err != nil {
			return nil, err
		}
		for _, r := range msgs {
			if r.Header.Seq != c.seq {
				continue
			}
			switch r.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if errno := ackErrno(r.Data); errno != 0 {
					return nil, fmt.Errorf("nf_tables dump, %w", errno)
				}
				return out, nil
			}
			if len(r.Data) >= sizeofNfgenmsg {
				out = append(out, r.Data[sizeofNfgenmsg:])
			}
		}
	}
}

// get sends one request for a single object and returns its attributes;
// a missing object is the kernel's ENOENT.
func (c *nftConn) get(family uint8, m nftMsg) ([]byte, error) {
	c.seq++
	m.flags |= unix.NLM_F_ACK
	if err := unix.Sendto(c.fd, m.encode(nil, nftType(m.typ), family, 0, c.seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sending nf_tables request, %w", err)
	}
	var out []byte
	for {
		msgs, err := c.receive()
		if err != nil {
			return nil, err
		}
		for _, r := range msgs {
			if r.Header.Seq != c.seq {
				continue
			}
			if r.Header.Type == unix.NLMSG_ERROR {
				if errno := ackErrno(r.Data); errno != 0 {
					return nil, errno
				}
				return out, nil
			}
			if len(r.Data) >= sizeofNfgenmsg {
				out = r.Data[sizeofNfgenmsg:]
			}
		}
	}
}

func (c *nftConn) receive() ([]nlMessage, error) {
	buf := make([]byte, os.Getpagesize()*8)
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	if err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return nil, fmt.Errorf("no answer from nf_tables within %v, %w", nftTimeout, err)
		}
		return nil, fmt.Errorf("receiving from nf_tables, %w", err)
	}
	return parseNL(buf[:n])
}

// nlMessage is a received netlink message.
type nlMessage struct {
	Header unix.NlMsghdr
	Data   []byte
}

func parseNL(b []byte) ([]nlMessage, error) {
	var out []nlMessage
	for len(b) >= unix.NLMSG_HDRLEN {
		var h unix.NlMsghdr
		h.Len = binary.NativeEndian.Uint32(b[0:4])
		h.Type = binary.NativeEndian.Uint16(b[4:6])
		h.Flags = binary.NativeEndian.Uint16(b[6:8])
		h.Seq = binary.NativeEndian.Uint32(b[8:12])
		h.Pid = binary.NativeEndian.Uint32(b[12:16])
		if int(h.Len) < unix.NLMSG_HDRLEN || int(h.Len) > len(b) {
			return nil, fmt.Errorf("malformed netlink message (length %d of %d)", h.Len, len(b))
		}
		out = append(out, nlMessage{Header: h, Data: b[unix.NLMSG_HDRLEN:h.Len]})
		b = b[nlAlign(int(h.Len)):]
	}
	return out, nil
}

// ackErrno reads the error of an NLMSG_ERROR message; 0 is an
// acknowledgement.
func ackErrno(data []byte) unix.Errno {
	if len(data) < 4 {
		return unix.EBADMSG
	}
	code := int32(binary.NativeEndian.Uint32(data[0:4]))
	return unix.Errno(-code)
}

func nlAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }

// Attribute encoding. nf_tables' integer attributes are big-endian;
// register contents (marks, addresses) are in host order.

func nla(typ uint16, data []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofNlAttr+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%unix.NLA_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

func nlaNested(typ uint16, children ...[]byte) []byte {
	var data []byte
	for _, c := range children {
		data = append(data, c...)
	}
	return nla(typ|unix.NLA_F_NESTED, data)
}

func nlaString(typ uint16, s string) []byte { return nla(typ, append([]byte(s), 0)) }

func nlaBE32(typ uint16, v uint32) []byte { return nla(typ, binary.BigEndian.AppendUint32(nil, v)) }

// parseAttrs splits a run of attributes into type -> payload; nested and
// byte-order flags are dropped from the type.
func parseAttrs(b []byte) map[uint16][]byte {
	out := map[uint16][]byte{}
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < unix.SizeofNlAttr || l > len(b) {
			break
		}
		out[t] = b[unix.SizeofNlAttr:l]
		b = b[min(nlAlign(l), len(b)):]
	}
	return out
}

// Expressions of a rule, each an NFTA_LIST_ELEM of NFTA_RULE_EXPRESSIONS.

func nftExpr(name string, data ...[]byte) []byte {
	return nlaNested(unix.NFTA_LIST_ELEM, nlaString(unix.NFTA_EXPR_NAME, name), nlaNested(unix.NFTA_EXPR_DATA, data...))
}

func nftData(typ uint16, value []byte) []byte {
	return nlaNested(typ, nla(unix.NFTA_DATA_VALUE, value))
}

// exprMetaLoad: reg1 = meta key.
func exprMetaLoad(key uint32) []byte {
	return nftExpr("meta", nlaBE32(unix.NFTA_META_DREG, unix.NFT_REG_1), nlaBE32(unix.NFTA_META_KEY, key))
}

// exprMetaSet: meta key = reg1.
func exprMetaSet(key uint32) []byte {
	return nftExpr("meta", nlaBE32(unix.NFTA_META_SREG, unix.NFT_REG_1), nlaBE32(unix.NFTA_META_KEY, key))
}

// exprCtLoad: reg1 = ct key.
func exprCtLoad(key uint32) []byte {
	return nftExpr("ct", nlaBE32(unix.NFTA_CT_DREG, unix.NFT_REG_1), nlaBE32(unix.NFTA_CT_KEY, key))
}

// exprCtSet: ct key = reg1.
func exprCtSet(key uint32) []byte {
	return nftExpr("ct", nlaBE32(unix.NFTA_CT_SREG, unix.NFT_REG_1), nlaBE32(unix.NFTA_CT_KEY, key))
}

// exprCmp: continue iff reg1 <op> value.
func exprCmp(op uint32, value []byte) []byte {
	return nftExpr("cmp", nlaBE32(unix.NFTA_CMP_SREG, unix.NFT_REG_1), nlaBE32(unix.NFTA_CMP_OP, op), nftData(unix.NFTA_CMP_DATA, value))
}

// exprBitwise32: reg1 = (reg1 & mask) ^ xor, on 32 bits.
func exprBitwise32(mask, xor uint32) []byte {
	return nftExpr("bitwise",
		nlaBE32(unix.NFTA_BITWISE_SREG, unix.NFT_REG_1),
		nlaBE32(unix.NFTA_BITWISE_DREG, unix.NFT_REG_1),
		nlaBE32(unix.NFTA_BITWISE_LEN, 4),
		nftData(unix.NFTA_BITWISE_MASK, u32(mask)),
		nftData(unix.NFTA_BITWISE_XOR, u32(xor)))
}

// exprFibDaddrIifType: reg1 = the address type of the destination as seen
// on the input interface (nft's `fib daddr . iif type`).
func exprFibDaddrIifType() []byte {
	return nftExpr("fib",
		nlaBE32(unix.NFTA_FIB_DREG, unix.NFT_REG_1),
		nlaBE32(unix.NFTA_FIB_RESULT, unix.NFT_FIB_RESULT_ADDRTYPE),
		nlaBE32(unix.NFTA_FIB_FLAGS, unix.NFTA_FIB_F_DADDR|unix.NFTA_FIB_F_IIF))
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// ifname is an interface name as meta iifname loads it: IFNAMSIZ bytes,
// zero-padded.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// nftComment encodes a rule comment as nft(8) stores it in the rule's
// user data, so `nft list ruleset` shows it.
func nftComment(s string) []byte {
	const udataRuleComment = 0 // NFTNL_UDATA_RULE_COMMENT
	v := append([]byte(s), 0)
	return append([]byte{udataRuleComment, byte(len(v))}, v...)
}

// parseNFTComment reads a comment back from a rule's user data.
func parseNFTComment(b []byte) (string, bool) {
	for len(b) >= 2 {
		t, l := b[0], int(b[1])
		if 2+l > len(b) {
			return "", false
		}
		if t == 0 {
			v := b[2 : 2+l]
			if n := len(v); n > 0 && v[n-1] == 0 {
				v = v[:n-1]
			}
			return string(v), true
		}
		b = b[2+l:]
	}
	return "", false
}

const (
	// sizeofNfgenmsg is the size of struct nfgenmsg, which follows the
	// netlink header of every nfnetlink message.
	sizeofNfgenmsg = 4
	// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an
	// attribute type.
	nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)
