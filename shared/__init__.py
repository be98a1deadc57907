"""Shared by every hookline process: config, models, errors, logs, signing; store/policy/process."""
