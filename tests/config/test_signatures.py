"""The config layer's functions take their parameters past the third by keyword only (issue 22: no long positional lists)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import gateway.config

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def test_no_function_of_the_config_layer_takes_more_than_three_by_position() -> None:
    crowded = []
    for module_info in pkgutil.iter_modules(gateway.config.__path__, "gateway.config."):
        module = importlib.import_module(module_info.name)
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__:
                continue
            positional = [p for p in inspect.signature(function).parameters.values() if p.kind in POSITIONAL]
            if len(positional) > 3:
                crowded.append(f"{module.__name__}.{name}")
    assert crowded == []
