"""The sending engine: how a request reaches a model and its answer comes back.

The sender the run talks to (:mod:`.protocol`), the background loop and its scheduling rules (concurrency, replicas,
the budget), the transports (litellm, an OpenAI-compatible endpoint over HTTP, a provider's Batch API), the one
retry policy, the reply checks, the wire request of reasoning models, the failures and the status line.
See docs/architecture.md."""
