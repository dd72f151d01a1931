"""World info (lorebooks): the entry model and activation, as pure functions (no I/O)."""
