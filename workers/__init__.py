"""Worker processes: claim due jobs under a lease, send them signed, finish fenced by token."""
