"""numpy, imported when first used: it comes with ``gguf`` (the ``live`` extra), and the
``pcspec`` command line imports ``pcspec.live`` to register ``pcspec live``, so an eager
import would break every command on an install without the extra."""

from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            try:
                self._module = importlib.import_module(self._name)
            except ModuleNotFoundError:
                from pcspec.core.errors import PcspecError

                raise PcspecError(
                    f"pcspec live needs {self._name}: install the live extra (pip install '.[live]')"
                ) from None
        return getattr(self._module, attr)


np: Any = _Lazy("numpy")
