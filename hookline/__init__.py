"""hookline, durable webhook delivery: the service's one import namespace.

The repository keeps each part in its own top-level folder (supervisor/, ingest/,
workers/, shared/, rehearsal/); each `hookline/<part>` entry here is a symlink to it,
so a checkout, the editable install, mypy and a built wheel all see the same modules
under the same names (`hookline.shared.config`, ...). A wheel holds real files: the
build copies what the links point at.
"""
