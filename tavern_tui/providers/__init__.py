"""Model providers: an OpenAI-compatible streaming adapter on httpx and an offline demo."""
