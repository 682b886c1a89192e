"""The model's SQL sandbox: the guard, the read-only connection, the storage check, the worker."""
