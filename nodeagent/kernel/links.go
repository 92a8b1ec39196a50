package kernel

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/vishvananda/netlink"
)

// resubscribeDelay paces new link subscriptions after the kernel dropped
// one (a full socket buffer ends it).
const resubscribeDelay = time.Second

// WatchLinks calls fn with the MAC of every link created, changed or
// removed in the namespace, until ctx ends. A subscription the kernel
// drops is renewed; updates lost meanwhile are what the agent's periodic
// converge is for. It returns an error only if the first subscription
// fails.
func (k *Kernel) WatchLinks(ctx context.Context, log *slog.Logger, fn func(mac net.HardwareAddr)) error {
	first := true
	for ctx.Err() == nil {
		ch := make(chan netlink.LinkUpdate, 128)
		opts := netlink.LinkSubscribeOptions{
			ErrorCallback: func(err error) { log.Debug("link subscription", "err", err) },
		}
		if k.ns.IsOpen() {
			ns := k.ns
			opts.Namespace = &ns
		}
		if err := netlink.LinkSubscribeWithOptions(ch, ctx.Done(), opts); err != nil {
			if first {
				return err
			}
			log.Warn("renewing the link subscription", "err", err)
		}
		first = false
		for u := range ch {
			if u.Link != nil {
				fn(u.Attrs().HardwareAddr)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(resubscribeDelay):
		}
	}
	return nil
}
