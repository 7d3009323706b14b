"""Translations between the APIs clients speak and the OpenAI Chat Completions API, without I/O."""
