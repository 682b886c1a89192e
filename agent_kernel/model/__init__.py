"""The model side: the SDK client, conversation repair, caching, thinking, prices, usage."""
