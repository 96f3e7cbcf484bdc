"""A small thread-safe LRU cache, for parsed statements (:mod:`.validate`) and translations
(:mod:`.emulator`): clients send the same introspection text on every connection."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class Cache(Generic[_K, _V]):
    """A small thread-safe LRU map: clients send the same catalog queries on every connection."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
