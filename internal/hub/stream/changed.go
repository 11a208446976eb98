package stream

import "github.com/nats-io/nats.go"

// InventoryChangedSubject carries the ingester's word that it committed
// changes to the inventory, so that the API's watches read them at once
// rather than at their next poll. It is plain NATS, not a stream: a word
// lost (NATS down, no API listening) costs only latency, since the feed
// still polls, and the word holds nothing, since the watches read what
// changed from the database.
const InventoryChangedSubject = "purser.inventory.changed"

// NotifyInventoryChanged says that the inventory changed; it does not
// wait, and a failure is only latency for the watches.
func (c *Client) NotifyInventoryChanged() { _ = c.nc.Publish(InventoryChangedSubject, nil) }

// OnInventoryChanged calls fn on each word that the inventory changed,
// until stop.
func (c *Client) OnInventoryChanged(fn func()) (stop func(), err error) {
	sub, err := c.nc.Subscribe(InventoryChangedSubject, func(*nats.Msg) { fn() })
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
