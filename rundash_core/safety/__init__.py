"""What keeps a shared instance safe: the one gate, secrets hidden, untrusted text made inert, imports, user regexes."""
