"""Provides the request stage of a step's opening: hooks that own the call config alone (model
parameters), never history or the frozen system assembly.

Rules: seed 000 §1 ("`agent/request` owns call config only. It neither creates history nor
replaces frozen system assembly") and DESIGN.md "One step" (request, then prepare).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tavern_tui.engine.step.types import Assembly

RequestHook = Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]
"""A request hook: given the model ("" = the provider's default) and the call config so far (a
read-only view), returns None to keep the config or the whole config to send instead."""


def request_config(assembly: Assembly, hooks: Sequence[RequestHook]) -> Assembly:
    """Run `hooks` in order on the assembly's call config, each seeing the previous one's result.
    Returns the assembly with the final config (the same object when no hook changed it); its
    system section, context, input and history are never touched.

    Raises:
        TypeError: a hook returned something other than a mapping with string keys.
        whatever a hook raises (the opening puts the claimed input back).
    """
    config: Mapping[str, Any] = assembly.config
    for hook in hooks:
        changed = hook(assembly.model, dict(config))
        if changed is None:
            continue
        if not isinstance(changed, Mapping) or not all(isinstance(k, str) for k in changed):
            raise TypeError(f"a request hook returned {type(changed).__name__}, not a call config mapping")
        config = changed
    return assembly if config is assembly.config else replace(assembly, config=dict(config))
