"""The operator's parts on its loop thread (the mailbox): invokers, eager starts, result
queues, timers and the output buffer."""
