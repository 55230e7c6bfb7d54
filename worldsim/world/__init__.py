"""The world: copy-on-write state, timelines, the moves that change them, and extraction."""
