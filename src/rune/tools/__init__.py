"""Built-in tools, the sandbox policy and the write choke point."""
