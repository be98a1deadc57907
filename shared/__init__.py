"""Shared by every hookline process: configuration, the job store, signing, retry policy, logs."""
