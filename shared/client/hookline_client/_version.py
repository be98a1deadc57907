"""The version of hookline and of hookline-client, written here only.

Both distributions read it when they are built (`[tool.setuptools.dynamic]` in
shared/client/pyproject.toml and in the repository's pyproject.toml; the repository's
setup.py pins the service's `hookline-client` requirement to it); a release bumps this line
and nothing else (OPERATIONS.md, "Releasing").
"""

__version__ = "0.1.0"
