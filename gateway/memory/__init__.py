"""Server-side chat memory: stores, trimming policies and the per-request flow."""
