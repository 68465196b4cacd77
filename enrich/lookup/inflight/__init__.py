"""The join's keys in flight: batched into requests, registered with the chunks waiting for
them, settled (cached, retried) and delivered to those chunks."""
