"""`hookline tenants ...`: the SaaS's customers (see docs/tenants.md).

This branch holds only the group itself; its actions come from the modules in ACTION_MODULES,
each with `add_actions(group)` (`group.add_parser(...)`): the token actions are in
supervisor/cli/tenant_tokens.py. The tenant CRUD actions (list, show, put, delete, ...) are
added here by the operator-side work.
"""

from __future__ import annotations

import importlib
from typing import Any

ACTION_MODULES: tuple[str, ...] = ("hookline.supervisor.cli.tenant_tokens",)
"""Modules adding `hookline tenants` actions (each: `add_actions(group)`)."""


def register(sub: Any) -> None:
    """Add the `tenants` group to the CLI, with the actions of ACTION_MODULES."""
    group = sub.group("tenants", help="manage tenants (your customers, each owning "
                                      "destinations)")
    for module in ACTION_MODULES:
        importlib.import_module(module).add_actions(group)
