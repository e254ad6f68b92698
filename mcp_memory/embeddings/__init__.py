"""Embedding providers and the texts they embed (pure, no database)."""
