"""utilon as a long-running scheduler service: the store, tenants, the engine (the core
and a live backend, taking jobs at any time), the HTTP API and its client."""
