"""pyhello: an example OpenTofu provider written against the tf SDK."""
