"""Old parameter and attribute names kept as deprecated aliases of the API's one vocabulary.

Every public name follows one spelling per concept (``eos_token_id``, ``sequence_length``,
``num_threads``, ``cache_dir``, ...). The spellings used before keep working for one release,
with a :class:`DeprecationWarning` naming the replacement, through the two helpers here, so that
every alias behaves the same way and the list of aliases can be read back
(:func:`deprecated_parameters`).
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

__all__ = ["deprecated_parameters", "moved_module", "renamed_attribute", "renamed_parameters"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _warn(what: str, old: str, new: str, stacklevel: int, note: str | None = None) -> None:
    why = f" ({note})" if note else ""
    warnings.warn(
        f"{what}: {old!r} is deprecated and will be removed in the next release; use {new!r}{why}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def renamed_parameters(**renames: str | tuple[str, str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept each old keyword (``old=new``) as a deprecated alias of the new one.

    >>> @renamed_parameters(seqlen="sequence_length")
    ... def f(*, sequence_length: int) -> int: ...

    ``old=(new, note)`` adds ``note`` to the warning, for a rename that is not only a spelling
    (the old name meant something else elsewhere in the API, and the user should check the value).
    Passing both spellings is a ``TypeError``, as passing one keyword twice is.
    """
    names = {old: new if isinstance(new, str) else new[0] for old, new in renames.items()}
    notes = {old: new[1] for old, new in renames.items() if not isinstance(new, str)}

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        name = getattr(func, "__qualname__", repr(func)).replace(".__init__", "")

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in names.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(
                            f"{name}() got {old!r} and {new!r}; {old!r} is the old name of {new!r}"
                        )
                    _warn(f"{name}()", old, new, stacklevel=2, note=notes.get(old))
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        previous: dict[str, str] = getattr(func, "__deprecated_parameters__", {})
        wrapper.__deprecated_parameters__ = {**previous, **names}  # type: ignore[attr-defined]
        return wrapper

    return decorate


def deprecated_parameters(func: Callable[..., Any]) -> dict[str, str]:
    """``{old: new}`` of the aliases :func:`renamed_parameters` gave ``func`` (or a class's
    ``__init__``)."""
    target = func.__init__ if isinstance(func, type) else func  # type: ignore[misc]
    return dict(getattr(target, "__deprecated_parameters__", {}))


class renamed_attribute(Generic[T]):  # lower case: used like `property`
    """A class attribute that forwards to ``new`` with a :class:`DeprecationWarning`.

    >>> class C:
    ...     threads = renamed_attribute[int]("num_threads")
    """

    def __init__(self, new: str) -> None:
        self.new = new
        self.old = new

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name
        self.owner = owner.__name__

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> renamed_attribute[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> T | renamed_attribute[T]:
        if obj is None:
            return self
        _warn(f"{self.owner}.{self.old}", self.old, self.new, stacklevel=2)
        value: T = getattr(obj, self.new)
        return value

    def __set__(self, obj: object, value: T) -> None:
        _warn(f"{self.owner}.{self.old}", self.old, self.new, stacklevel=2)
        setattr(obj, self.new, value)


class _MovedModule(types.ModuleType):
    """What ``sys.modules`` holds under a module's old public name: every attribute is the new
    module's, with a :class:`DeprecationWarning` that names its public home."""

    def __init__(self, old: str, target: types.ModuleType, home: str) -> None:
        super().__init__(old, target.__doc__)
        self.__dict__["_target"] = target
        self.__dict__["_home"] = home

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._target, name)
        _warn(f"module {self.__name__!r}", f"{self.__name__}.{name}", f"{self._home}.{name}", stacklevel=2)
        return value


def moved_module(old: str, target: types.ModuleType, home: str) -> None:
    """Keep ``from <old> import name`` working, deprecated, after ``old`` became ``target``
    (whose public names live in ``home``). The package attribute named like ``old`` is not
    touched: it stays whatever the package bound (e.g. a function of the same name)."""
    sys.modules.setdefault(old, _MovedModule(old, target, home))
