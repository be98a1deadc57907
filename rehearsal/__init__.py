"""Rehearsal fixtures: a local webhook receiver, sample payloads and chaos scenarios."""
